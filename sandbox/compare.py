"""Output comparison: accept what a real judge accepts, and nothing more.

stdin programs (`compare_output`), in order, stopping at the first that accepts:
1. exact equality;
2. line-wise token comparison: blank lines and whitespace between tokens are ignored, the
   non-blank lines must correspond one to one (so reordered, missing or extra lines fail).
   An expected token that is an integer (`[+-]?digits`) accepts only the same token: integers
   compare as integers, by their digits, never through float, at any length. So `2.0`, `2e0`,
   `1e+18` and `1000000000000000000.0` are wrong answers to `2` / `1000000000000000000`, and so
   are the non-canonical spellings `+2`, `02`, `-0` of `2` and `0`. This is Codeforces testlib:
   its default checkers read integer answers as integers (ncmp's readLong rejects `2.0`, a
   leading `+`, leading zeros and `-0`; wcmp compares the tokens as strings). LiveCodeBench is
   laxer (it compares lines as Decimals, so it takes all of these); we follow testlib because a
   model trained on our verdicts must pass a real judge. An expected token that is a non-integer
   number (`0.5`, `2.0`, `1e-9`) accepts any number within absolute or relative error 1e-6
   (testlib's rcmp6), whatever its format (`2` for `2.0` passes). A real-valued problem whose
   expected output prints whole values as integers (`%g`) therefore needs a checker.
Modes a problem may declare: `case-insensitive-yesno` (YES/yes/Yes tokens match each other),
`unordered-tokens` (the multiset of tokens must match, tokens compared as strings), `any-of`
(the expected output is a JSON list of acceptable outputs), `checker` (a program decides; see
checker.py).

functional problems (`compare_value`): JSON values; a returned tuple equals a list; booleans
only equal booleans (True is not 1); an int expected value accepts only an int of that value
(a float never: not `1e18` for 10**18, and not `2.0` for 2, though Python's `2.0 == 2` and
LiveCodeBench's `==` compare take both; the value's JSON type is part of the answer, as in
the stdin rule above); a float expected value accepts an int or float within 1e-6.
"""

from __future__ import annotations

import json
import math
import re

TOLERANCE = 1e-6
_NUM = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_INT = re.compile(r"[+-]?\d+\Z")


def _close(expected: float, actual: float) -> bool:
    if math.isinf(expected) or math.isnan(expected) or math.isinf(actual) or math.isnan(actual):
        return False
    diff = abs(expected - actual)
    return diff <= TOLERANCE + 1e-15 or diff <= TOLERANCE * abs(expected) + 1e-15


def tokens_equal(expected: str, actual: str, yesno: bool = False) -> bool:
    """One token pair under the rules above."""
    if expected == actual:
        return True
    if yesno and expected.lower() in ("yes", "no"):
        return actual.lower() == expected.lower()
    if _INT.match(expected) or not (_NUM.match(expected) and _NUM.match(actual)):
        return False  # an integer accepts only itself; a word only itself
    return _close(float(expected), float(actual))


def _lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def _default(expected: str, actual: str, yesno: bool) -> tuple[bool, str]:
    if expected == actual:
        return True, ""
    exp = _lines(expected)
    act = _lines(actual)
    if len(exp) != len(act):
        return False, f"expected {len(exp)} non-empty lines, got {len(act)}"
    for n, (e_line, a_line) in enumerate(zip(exp, act, strict=True)):
        if len(e_line) != len(a_line):
            return False, f"line {n + 1}: expected {len(e_line)} tokens, got {len(a_line)}"
        for e, a in zip(e_line, a_line, strict=True):
            if not tokens_equal(e, a, yesno):
                return False, f"line {n + 1}: expected {e[:40]!r}, got {a[:40]!r}"
    return True, ""


def _unordered(expected: str, actual: str) -> tuple[bool, str]:
    ok = sorted(expected.split()) == sorted(actual.split())
    return ok, "" if ok else "token multisets differ"


def compare_output(expected: str, actual: str, mode: str = "default") -> tuple[bool, str]:
    """Judge one stdin test's output; returns (accepted, short reason when not)."""
    if mode == "unordered-tokens":
        return _unordered(expected, actual)
    if mode == "any-of":
        try:
            options = json.loads(expected)
        except ValueError:
            options = None
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            return _default(expected, actual, False)
        if any(_default(o, actual, False)[0] for o in options):
            return True, ""
        return False, f"matches none of the {len(options)} accepted answers"
    return _default(expected, actual, yesno=mode == "case-insensitive-yesno")


def values_equal(expected, actual) -> bool:
    """Deep equality of JSON values with the numeric rules above (tuples arrive as lists)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int):
        return isinstance(actual, int) and expected == actual
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        try:
            return expected == actual or _close(expected, float(actual))
        except OverflowError:  # an int too large for a float is far from any float
            return False
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(values_equal, expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            values_equal(v, actual[k]) for k, v in expected.items()
        )
    return type(expected) is type(actual) and expected == actual


def canonical_json(text: str) -> str:
    """The expected value re-encoded the way the child encodes returns (fast-path equality)."""
    try:
        return json.dumps(json.loads(text))
    except ValueError:
        return text


def compare_value(expected_json: str, actual_json: str) -> tuple[bool, str]:
    """Judge one functional test: expected and returned value, both JSON text."""
    if expected_json == actual_json:
        return True, ""
    try:
        ok = values_equal(json.loads(expected_json), json.loads(actual_json))
    except ValueError:
        ok = False
    return ok, "" if ok else f"expected {expected_json[:60]}, got {actual_json[:60]}"

"""Output comparison: accept what a real judge accepts, and nothing more.

stdin programs (`compare_output`), in order, stopping at the first that accepts:
1. exact equality;
2. line-wise token comparison: blank lines and whitespace between tokens are ignored, the
   non-blank lines must correspond one to one (so reordered, missing or extra lines fail);
   integer tokens are compared exactly as integers (by their digits, never through float, any
   length); non-integer numbers with absolute or relative error 1e-6 (testlib's rcmp6). An
   integer expected token accepts a decimal of the same exact value ("2" vs "2.0"), and accepts
   tolerance only when the expected output also holds non-integer numbers (a float answer that
   happens to be whole).
Modes a problem may declare: `case-insensitive-yesno` (YES/yes/Yes tokens match each other),
`unordered-tokens` (the multiset of tokens must match), `any-of` (the expected output is a JSON
list of acceptable outputs), `checker` (a program decides; see checker.py).

functional problems (`compare_value`): JSON values; a returned tuple equals a list; numbers as
above (ints exact, floats 1e-6); booleans only equal booleans (True is not 1).
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation

TOLERANCE = 1e-6
_NUM = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_INT = re.compile(r"[+-]?\d+\Z")


def _canon_int(token: str) -> str:
    digits = token.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if token[0] == "-" and digits != "0" else digits


def _close(expected: float, actual: float) -> bool:
    if math.isinf(expected) or math.isnan(expected) or math.isinf(actual) or math.isnan(actual):
        return False
    diff = abs(expected - actual)
    return diff <= TOLERANCE + 1e-15 or diff <= TOLERANCE * abs(expected) + 1e-15


def tokens_equal(expected: str, actual: str, floaty: bool, yesno: bool = False) -> bool:
    """One token pair; `floaty`: the expected output holds non-integer numbers."""
    if expected == actual:
        return True
    if yesno and expected.lower() in ("yes", "no"):
        return actual.lower() == expected.lower()
    if not (_NUM.match(expected) and _NUM.match(actual)):
        return False
    e_int, a_int = _INT.match(expected), _INT.match(actual)
    if e_int and a_int:
        return _canon_int(expected) == _canon_int(actual)
    if e_int and not floaty:
        try:
            return Decimal(expected) == Decimal(actual)
        except InvalidOperation:
            return False
    return _close(float(expected), float(actual))


def _lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def _has_float(lines: list[list[str]]) -> bool:
    return any(_NUM.match(t) and not _INT.match(t) for line in lines for t in line)


def _default(expected: str, actual: str, yesno: bool) -> tuple[bool, str]:
    if expected == actual:
        return True, ""
    exp, act = _lines(expected), _lines(actual)
    if len(exp) != len(act):
        return False, f"expected {len(exp)} non-empty lines, got {len(act)}"
    floaty = _has_float(exp)
    for n, (e_line, a_line) in enumerate(zip(exp, act, strict=True)):
        if len(e_line) != len(a_line):
            return False, f"line {n + 1}: expected {len(e_line)} tokens, got {len(a_line)}"
        for e, a in zip(e_line, a_line, strict=True):
            if not tokens_equal(e, a, floaty, yesno):
                return False, f"line {n + 1}: expected {e[:40]!r}, got {a[:40]!r}"
    return True, ""


def _unordered(expected: str, actual: str) -> tuple[bool, str]:
    def canon(text: str) -> list[str]:
        return sorted(_canon_int(t) if _INT.match(t) else t for t in text.split())

    ok = canon(expected) == canon(actual)
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
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if isinstance(expected, int) and isinstance(actual, int):
            return expected == actual
        return expected == actual or _close(float(expected), float(actual))
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

"""The `answer` problem kind's reward: a math-style exact answer, normalised. Nothing is run.

    exact_answer(problem, response, verdict=None) -> (1.0 | 0.0, {"formatted": 1.0 | 0.0})

The expected answer is the problem's one test output (`tests[0]["output"]`, data/problem.py).
The reply's final answer is read from the text after the reasoning (after the first `</think>`;
a reply that opens `<think>` and never closes it has no answer), in this order:
1. the last `\\boxed{...}` (braces balanced);
2. else the text after the last `####` (GSM8K's marker), or after the last `Answer:` (any
   case), up to the end of its line;
3. else the last number in the text (`-3`, `2.5`, `.5`, `7/2`), else its last non-empty line.
The `formatted` component is 1.0 when the answer came from 1 or 2 (the reply followed the
prompt's format), 0.0 when it was guessed by 3.

Both answers are then normalised (`normalise`):
- `\\boxed{x}` and `$x$` are unwrapped, `\\frac{a}{b}` / `\\dfrac{a}{b}` become `a/b`;
- whitespace is collapsed, the text stripped and lower-cased, trailing periods dropped;
- a number is compared by value: thousands commas (`1,000`), decimals and fractions are read
  exactly (`fractions.Fraction`), so `0.5` == `.5` == `1/2` == `2/4` and `3` == `3.0`.
Anything else is compared as the normalised string. Units, percentages, expressions and
intervals are not understood (`50%` != `0.5`, `x = 3` != `3`); a reward function of your own
(`executor.reward`, sandbox/rewards/plugin.py) can do more.
"""

from __future__ import annotations

import re
from fractions import Fraction

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_NUMBER = re.compile(r"-?(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+)?")
_MARKERS = re.compile(r"(?:####|answer\s*:)", re.IGNORECASE)
_FRAC = re.compile(r"\\d?frac\{([^{}]*)\}\{([^{}]*)\}")
_EXACT_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:/\d+(?:\.\d+)?)?")


def boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` in `text` (braces balanced), else None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    i = start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None  # never closed: the reply was cut inside it


def final_answer(response: str) -> tuple[str, bool]:
    """(the reply's final answer, whether it was marked: boxed, #### or Answer:)."""
    text = response
    if THINK_CLOSE in text:
        text = text.split(THINK_CLOSE, 1)[1]
    elif THINK_OPEN in text:
        return "", False  # cut inside its reasoning
    found = boxed(text)
    if found is not None:
        return found, True
    marks = list(_MARKERS.finditer(text))
    if marks:
        return text[marks[-1].end() :].split("\n", 1)[0], True
    numbers = _NUMBER.findall(text)
    if numbers:
        return numbers[-1], False
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else ""), False


def normalise(answer: str) -> str:
    """The comparable form of an answer (module doc): a number as its exact value `p` or `p/q`,
    anything else as trimmed lower-case text."""
    text = boxed(answer) if "\\boxed{" in answer else answer
    text = (text or "").strip()
    if len(text) >= 2 and text[0] == text[-1] == "$":
        text = text[1:-1]
    text = _FRAC.sub(r"\1/\2", text)
    text = " ".join(text.split()).lower().rstrip(".").strip()
    value = _number(text)
    return text if value is None else str(value)


def _number(text: str) -> Fraction | None:
    compact = text.replace(" ", "")
    if not compact or not _EXACT_NUMBER.fullmatch(compact) or not any(c.isdigit() for c in compact):
        return None
    try:
        num, _, den = compact.replace(",", "").partition("/")
        return Fraction(num) / Fraction(den) if den else Fraction(num)
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(got: str, expected: str) -> bool:
    """Whether two answers are equal after `normalise`."""
    return normalise(got) == normalise(expected)


def exact_answer(problem, response: str, verdict=None) -> tuple[float, dict[str, float]]:
    """The shipped reward of `answer` problems (`executor.reward =
    "microcoder.sandbox.rewards.answer:exact_answer"`, also the default's choice for this kind): 1.0 when
    the reply's final answer equals the problem's (module doc), else 0.0; component `formatted`."""
    if not problem.tests:
        raise ValueError(f"problem {problem.id}: no expected answer (tests[0].output)")
    got, marked = final_answer(response)
    ok = bool(got.strip()) and answers_match(got, problem.tests[0]["output"])
    return (1.0 if ok else 0.0), {"formatted": 1.0 if marked else 0.0}

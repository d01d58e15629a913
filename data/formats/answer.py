"""Exact-answer rows (`{"id", "question", "answer"}`, GSM8K/MATH style) → `answer` Problems.

`answer` is a string or a number (written as the row has it: `0.5`, `"1/2"`, `"\\boxed{3}"`);
it becomes the problem's one test output, compared by sandbox/rewards/answer.py after normalising.
Extra keys are kept in `meta`.
"""

from __future__ import annotations

from microcoder.data.formats.common import RowContext
from microcoder.data.problem import Problem

ANSWER_KEYS = frozenset({"id", "question", "answer"})


def convert_answer(row: dict, ctx: RowContext) -> Problem:
    """Convert one exact-answer row."""
    pid = ctx.require(row, "id", (str, int))
    question = ctx.require(row, "question", str)
    answer = ctx.require(row, "answer", (str, int, float))
    if isinstance(answer, bool):
        raise ctx.error("answer", "expected a string or a number, got bool")
    if not str(answer).strip():
        raise ctx.error("answer", "empty: the expected answer is needed")
    return Problem(
        id=str(pid),
        kind="answer",
        prompt=question,
        tests=[{"input": "", "output": str(answer)}],
        source=str(row.get("source") or ""),
        difficulty=str(row.get("difficulty") or ""),
        meta={k: v for k, v in row.items() if k not in ANSWER_KEYS | {"source", "difficulty"}},
    )

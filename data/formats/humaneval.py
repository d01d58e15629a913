"""HumanEval rows (task_id, prompt, entry_point, canonical_solution, test) → `assert` Problem.

The model completes `prompt` (a signature + docstring), so the prompt is also the starter code.
Tests: one per assert of `check(candidate)` with `candidate = <entry_point>`; when `check` does
more than assert (loops, setup) the whole script plus `check(<entry_point>)` is one test.
"""

from __future__ import annotations

from microcoder.data.formats.check_split import split_check_script
from microcoder.data.formats.common import RowContext
from microcoder.data.problem import Problem


def convert_humaneval(row: dict, ctx: RowContext) -> Problem:
    """Convert one HumanEval (or HumanEval-shaped, e.g. HumanEval+) row."""
    task_id = ctx.require(row, "task_id", (str, int))
    prompt = ctx.require(row, "prompt", str)
    entry = ctx.require(row, "entry_point", str)
    if not entry.isidentifier():
        raise ctx.error("entry_point", f"{entry!r} is not a Python identifier")
    script = ctx.require(row, "test", str)
    try:
        codes, _ = split_check_script(script, candidate=entry)
    except ValueError as e:
        raise ctx.error("test", str(e)) from None
    return Problem(
        id=str(task_id),
        kind="assert",
        prompt=prompt,
        tests=[{"code": c} for c in codes],
        fn_name=entry,
        starter_code=prompt,
        platform="humaneval",
        source="HumanEval",
        meta={"solution": prompt + (row.get("canonical_solution") or "")},
    )

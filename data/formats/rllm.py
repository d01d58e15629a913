"""rllm / DeepCoder JSON rows (`problem`, `tests`, optional `solutions`) → Problem.

`tests` comes in three shapes: a list of `{input, output}` (Codeforces) or an object
`{inputs, outputs[, fn_name]}` (CodeContests / TACO), both stdin unless fn_name is given; or
`{functional: "def check(candidate): ...\\ncheck(Solution().name)"}` (LeetCode), which becomes an
`assert` problem with one test per assert and LEETCODE_PRELUDE (typing imports, ListNode,
TreeNode, list_node/tree_node helpers) as the prelude. Rows have no id: `<file stem>/<row>`.
`solutions` (one program, or a list) fills Problem.solutions (the references the build judges).
"""

from __future__ import annotations

from pathlib import Path

from microcoder.data.formats.apps import io_tests
from microcoder.data.formats.check_split import split_check_script
from microcoder.data.formats.common import RowContext, str_pairs
from microcoder.data.formats.leetcode_prelude import LEETCODE_PRELUDE
from microcoder.data.problem import Problem


def _list_tests(tests: list, ctx: RowContext) -> list[dict]:
    out = str_pairs(tests, ctx, "tests")
    if not out:
        raise ctx.error("tests", "empty: the row has no tests")
    return out


def _solutions(value) -> list[str]:
    """rllm's `solutions`: one program as a string, or a list of them; blanks dropped."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [s for s in items if isinstance(s, str) and s.strip()]


def convert_rllm(row: dict, ctx: RowContext) -> Problem:
    """Convert one rllm/DeepCoder row."""
    problem = ctx.require(row, "problem", str)
    tests = ctx.require(row, "tests", (list, dict))
    solutions = _solutions(row.get("solutions"))
    common = dict(
        id=f"{Path(ctx.source).name.split('.')[0]}/{ctx.line}",
        prompt=problem,
        source="rllm-deepcoder",
        solutions=solutions,
        meta={"solution": solutions[0] if solutions else ""},
    )
    if isinstance(tests, list):
        return Problem(kind="stdin", tests=_list_tests(tests, ctx), **common)
    if "functional" in tests:
        script = tests["functional"]
        if not isinstance(script, str):
            raise ctx.error("tests.functional", "expected a string")
        try:
            codes, candidate = split_check_script(script)
        except ValueError as e:
            raise ctx.error("tests.functional", str(e)) from None
        return Problem(
            kind="assert",
            tests=[{"code": c} for c in codes],
            fn_name=candidate.rsplit(".", 1)[-1],
            prelude=LEETCODE_PRELUDE,
            platform="leetcode",
            **common,
        )
    fn_name, cases = io_tests(tests, ctx, "tests")
    return Problem(
        kind="functional" if fn_name else "stdin", tests=cases, fn_name=fn_name, **common
    )

"""LeetCodeDataset rows (newfacade/LeetCodeDataset) → Problem.

Plain-value problems become `functional`: each `input_output` item `"a = 1, b = [2]"` becomes one
JSON value per line in the order of the method's signature, and its output one JSON value.
Tests whose recorded output is not a value (`Error: ...`, `Execution timed out`, empty) are
dropped and counted in `meta["dropped_tests"]`. Recorded outputs are `str(result)`, so for a
method annotated `-> str` the raw text is the expected string; otherwise it is parsed as a
literal (`True`, `[1, 2]`, `['a']`, `-inf`).

Linked-list / tree problems (ListNode / TreeNode in the starter code) cannot be expressed as
JSON arguments, so they become `assert` problems instead: one test per assert of the row's own
`check(candidate)` script (which builds its nodes with `tree_node(...)` / `list_node(...)`), with
the row's `prompt` (imports + ListNode/TreeNode helpers) kept as the prelude.
"""

from __future__ import annotations

from microcoder.data.formats.check_split import split_check_script
from microcoder.data.formats.common import RowContext, dropped, signature
from microcoder.data.formats.literals import LiteralError, parse_literal, parse_named_args, to_json
from microcoder.data.problem import Problem

NODE_TYPES = ("ListNode", "TreeNode")


def _fn_name(entry_point: str) -> str:
    return entry_point.rsplit(".", 1)[-1]


def _functional_tests(row: dict, ctx: RowContext, sig: tuple[list[str], str] | None, meta: dict):
    params, returns = sig if sig is not None else (None, "")
    returns_str = returns in ("str", "'str'")
    tests = []
    for i, io in enumerate(ctx.require(row, "input_output", list)):
        if not isinstance(io, dict) or not isinstance(io.get("input"), str):
            raise ctx.error(f"input_output[{i}].input", "missing or not a string")
        out = io.get("output")
        if not isinstance(out, str):
            raise ctx.error(f"input_output[{i}].output", "missing or not a string")
        if not out.strip() and not returns_str:
            dropped(meta, "empty expected output")
            continue
        if out.startswith("Error:") or out.startswith("Execution timed out"):
            dropped(meta, "expected output is a recorded error/timeout")
            continue
        try:
            args = parse_named_args(io["input"])
            expected = out if returns_str else parse_literal(out)
        except LiteralError:
            dropped(meta, "input or output is not a plain literal")
            continue
        if params is not None:
            if sorted(n for n, _ in args) != sorted(params):
                raise ctx.error(
                    f"input_output[{i}].input",
                    f"argument names {[n for n, _ in args]} do not match the signature {params}",
                )
            values = dict(args)
            args = [(p, values[p]) for p in params]
        tests.append({"input": "\n".join(to_json(v) for _, v in args), "output": to_json(expected)})
    return tests


def convert_leetcodedataset(row: dict, ctx: RowContext) -> Problem:
    """Convert one LeetCodeDataset row (see module doc for how node-typed problems are kept)."""
    entry = ctx.require(row, "entry_point", str)
    fn_name = _fn_name(entry)
    starter = row.get("starter_code") or ""
    description = ctx.require(row, "problem_description", str)
    completion = row.get("completion") or ""
    meta = {"solution": completion, "tags": row.get("tags") or []}
    common = dict(
        id=str(row.get("task_id") or row.get("question_id") or f"leetcode-{ctx.line}"),
        prompt=description,
        fn_name=fn_name,
        starter_code=starter,
        difficulty=str(row.get("difficulty") or ""),
        platform="leetcode",
        date=str(row.get("estimated_date") or ""),
        source="LeetCodeDataset",
        prelude=row.get("prompt") or "",
        solutions=[completion] if isinstance(completion, str) and completion.strip() else [],
        meta=meta,
    )
    if any(t in starter for t in NODE_TYPES):
        script = ctx.require(row, "test", str)
        try:
            codes, _ = split_check_script(script, candidate=entry)
        except ValueError as e:
            raise ctx.error("test", str(e)) from None
        return Problem(kind="assert", tests=[{"code": c} for c in codes], **common)
    tests = _functional_tests(row, ctx, signature(starter, fn_name), meta)
    if not tests:
        raise ctx.error(
            "input_output", f"no usable test (all dropped: {meta.get('dropped_tests')})"
        )
    return Problem(kind="functional", tests=tests, **common)

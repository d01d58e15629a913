"""APPS / TACO rows (`input_output` = {"inputs", "outputs", optional "fn_name"}) → Problem.

- Without `fn_name`: `stdin`. An input/output given as a list of lines is joined with newlines.
- `language` (optional, a row field some TACO/APPS derivatives carry: python, cpp, java): the
  language of the row's solutions and of the programs asked for (stdin rows only).
- With `fn_name`: `functional`. `inputs[i]` is the argument list (a non-list is one argument);
  each argument becomes one JSON line. APPS stores the expected return value wrapped in a
  one-element list (`[[1, 2]]` for `[1, 2]`) and its own checker accepts either form; we unwrap
  one-element lists, which is right for the wrapped convention (by far the common one) and
  documented here for the rare row that stored a one-element list bare.
"""

from __future__ import annotations

import json

from microcoder.data.formats.common import (
    RowContext,
    json_value,
    parse_megabytes,
    parse_seconds,
    row_language,
)
from microcoder.data.formats.literals import to_json
from microcoder.data.problem import Problem


def _text(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + "\n"
    return None


def io_tests(io, ctx: RowContext, field_name: str = "input_output") -> tuple[str, list[dict]]:
    """Parse an APPS-style `{"inputs", "outputs", "fn_name"?}` object → (fn_name, tests)."""
    if isinstance(io, str):
        if not io.strip():
            raise ctx.error(field_name, "empty: the row has no tests")
        io = json_value(io, ctx, field_name)
    if not isinstance(io, dict):
        raise ctx.error(field_name, f"expected an object, got {type(io).__name__}")
    inputs = io.get("inputs")
    outputs = io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise ctx.error(f"{field_name}.inputs", "inputs and outputs must both be lists")
    if len(inputs) != len(outputs):
        raise ctx.error(f"{field_name}.outputs", f"{len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise ctx.error(f"{field_name}.inputs", "empty: the row has no tests")
    fn_name = io.get("fn_name") or ""
    if not isinstance(fn_name, str):
        raise ctx.error(f"{field_name}.fn_name", "expected a string")
    tests = []
    for i, (x, y) in enumerate(zip(inputs, outputs, strict=True)):
        if fn_name:
            args = x if isinstance(x, list) else [x]
            if isinstance(y, list) and len(y) == 1:
                y = y[0]
            try:
                tests.append({"input": "\n".join(to_json(a) for a in args), "output": to_json(y)})
            except (TypeError, ValueError) as e:
                raise ctx.error(f"{field_name}.inputs[{i}]", f"not JSON-able ({e})") from None
        else:
            tx = _text(x)
            ty = _text(y)
            if tx is None or ty is None:
                bad = "inputs" if tx is None else "outputs"
                raise ctx.error(f"{field_name}.{bad}[{i}]", "expected a string or list of lines")
            tests.append({"input": tx, "output": ty})
    return fn_name, tests


def convert_apps(row: dict, ctx: RowContext) -> Problem:
    """Convert one APPS or TACO row."""
    question = ctx.require(row, "question", str)
    fn_name, tests = io_tests(ctx.require(row, "input_output", (str, dict)), ctx)
    solutions = row.get("solutions") or []
    if isinstance(solutions, str):
        try:
            solutions = json.loads(solutions) if solutions.strip() else []
        except json.JSONDecodeError:
            solutions = []
    if not isinstance(solutions, list):
        solutions = []
    solutions = [s for s in solutions if isinstance(s, str) and s.strip()]
    pid = row.get("problem_id", row.get("id"))
    language = row_language(row, ctx)
    if fn_name and language != "python":
        raise ctx.error("language", f"{language} rows must be stdin rows (no fn_name)")
    return Problem(
        id=str(pid) if pid is not None else f"apps-{ctx.line}",
        kind="functional" if fn_name else "stdin",
        prompt=question,
        tests=tests,
        fn_name=fn_name,
        starter_code=row.get("starter_code") or "",
        time_limit_s=parse_seconds(row.get("time_limit")),
        memory_mb=parse_megabytes(row.get("memory_limit")),
        difficulty=str(row.get("difficulty") or ""),
        date=str(row.get("date") or ""),
        source=str(row.get("source") or "APPS/TACO"),
        solutions=solutions,
        language=language,
        meta={"solution": solutions[0] if solutions else "", "url": row.get("url") or ""},
    )

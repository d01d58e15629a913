"""Turning a `def check(candidate): assert ...` test script into per-assert `assert` tests.

HumanEval, LeetCodeDataset and rllm's LeetCode rows ship tests as one script: helper
definitions, a `check(candidate)` function whose body is a list of asserts, and (rllm) a final
`check(Solution().name)` call. Splitting it gives one test per assert, so a judge can report how
many pass. When the body is anything other than plain asserts (loops, local setup), splitting
could change meaning, so the whole script is kept as a single test instead.
"""

from __future__ import annotations

import ast


def _is_check_call(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "check"
    )


def split_check_script(script: str, candidate: str | None = None) -> tuple[list[str], str]:
    """Return `(test_codes, candidate_expr)` for a check-style test script.

    `candidate` is the expression passed to `check` (e.g. `has_close_elements` or
    `Solution().maxArea`); when None it is taken from a trailing `check(EXPR)` call. Raises
    ValueError when the script does not parse or has no `check` function / candidate.
    """
    try:
        tree = ast.parse(script)
    except SyntaxError as e:
        raise ValueError(f"test script does not parse (line {e.lineno}: {e.msg})") from None
    checks = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    if len(checks) != 1:
        raise ValueError("test script needs exactly one `def check(candidate)`")
    check = checks[0]
    calls = [s for s in tree.body if _is_check_call(s)]
    if candidate is None:
        if not calls or not calls[-1].value.args:
            raise ValueError("no trailing `check(...)` call names the candidate")
        candidate = ast.get_source_segment(script, calls[-1].value.args[0])
    header = [
        ast.get_source_segment(script, s) for s in tree.body if s is not check and s not in calls
    ]
    body = check.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # docstring
    param = check.args.args[0].arg if check.args.args else "candidate"
    whole = f"{script.rstrip()}\n\n" + ("" if calls else f"check({candidate})\n")
    if not body or not all(isinstance(s, ast.Assert) for s in body):
        return [whole], candidate
    prefix = "".join(f"{h}\n" for h in header) + f"{param} = {candidate}\n"
    return [prefix + ast.get_source_segment(script, s) + "\n" for s in body], candidate

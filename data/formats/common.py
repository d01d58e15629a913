"""Small helpers shared by the per-format row converters."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter

from microcoder.data.problem import ProblemFormatError


class RowContext:
    """Where a row came from, to name it in errors: `file:line`."""

    def __init__(self, source: str, line: int | None):
        self.source = source
        self.line = line

    def error(self, field_name: str, message: str) -> ProblemFormatError:
        return ProblemFormatError(self.source, self.line, field_name, message)

    def require(self, row: dict, name: str, types):
        if name not in row or row[name] is None:
            raise self.error(name, "missing")
        value = row[name]
        if not isinstance(value, types):
            want = (
                types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
            )
            raise self.error(name, f"expected {want}, got {type(value).__name__}")
        return value


def json_value(text: str, ctx: RowContext, field_name: str, what: str = "not valid JSON"):
    """`text` parsed as JSON; a row error on `field_name` ("`what` (the parser's message)")."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ctx.error(field_name, f"{what} ({e.msg})") from None


def str_pairs(items: list, ctx: RowContext, field_name: str) -> list[dict[str, str]]:
    """Tests given as `[{input: str, output: str}, ...]` (other keys dropped); a row error on
    `field_name[i]` for an item that is not."""
    out = []
    for i, t in enumerate(items):
        if not isinstance(t, dict) or not all(
            isinstance(t.get(k), str) for k in ("input", "output")
        ):
            raise ctx.error(f"{field_name}[{i}]", "expected {input: str, output: str}")
        out.append({"input": t["input"], "output": t["output"]})
    return out


def dropped(meta: dict, reason: str, n: int = 1) -> None:
    """Count a test dropped from a row (the row itself survives) under `meta["dropped_tests"]`."""
    if n:
        counts = Counter(meta.get("dropped_tests") or {})
        counts[reason] += n
        meta["dropped_tests"] = dict(counts)


def signature(starter_code: str, fn_name: str) -> tuple[list[str], str] | None:
    """`(parameter names without self, return annotation source)` of `fn_name` in starter code.

    Starter code usually ends in an empty body; a `pass` is appended to parse it. None when the
    function is not found or the code does not parse.
    """
    src = starter_code.rstrip() + "\n"
    for fix in ("", "        pass\n", "    pass\n", "pass\n"):
        try:
            tree = ast.parse(src + fix)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == fn_name:
                names = [a.arg for a in node.args.posonlyargs + node.args.args]
                returns = ast.unparse(node.returns) if node.returns is not None else ""
                return [n for n in names if n not in ("self", "cls")], returns
        return None
    return None


_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")


def _amount(value) -> tuple[float, str] | None:
    """A positive number given as such or in a text (`2`, `"2.5 seconds"`), with the text (empty
    for a number); None when there is none."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value), ""
    if isinstance(value, str) and (m := _NUMBER.search(value)):
        n = float(m.group(1))
        return (n, value) if n > 0 else None
    return None


def parse_seconds(value) -> float | None:
    """`2`, `2.5`, `"1 second"`, `"2.0 seconds"`, `"1000 ms"` → seconds; None when unknown."""
    if (got := _amount(value)) is None:
        return None
    n, text = got
    return n / 1000 if "ms" in text or "milli" in text else n


def parse_megabytes(value) -> int | None:
    """`256`, `"256 megabytes"`, `"512 MB"` → MiB; None when unknown."""
    if (got := _amount(value)) is None:
        return None
    n = got[0]
    unit = got[1].lower()
    return int(n * 1024) if ("gb" in unit or "gib" in unit or "giga" in unit) else int(n)


LANGUAGE_ALIASES = {
    "python": "python",
    "python3": "python",
    "py": "python",
    "cpp": "cpp",
    "c++": "cpp",
    "cpp17": "cpp",
    "java": "java",
}
"""How sources name a program's language -> Problem.language."""


def row_language(row: dict, ctx: RowContext) -> str:
    """The row's `language` field as a Problem.language (absent: python); a row error names an
    unknown one."""
    value = row.get("language")
    if value is None or value == "":
        return "python"
    language = LANGUAGE_ALIASES.get(str(value).strip().lower())
    if language is None:
        raise ctx.error("language", f"{value!r} is not one of {', '.join(LANGUAGE_ALIASES)}")
    return language

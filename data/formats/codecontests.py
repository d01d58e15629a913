"""DeepMind CodeContests rows (`name`, `description`, `public_tests`, `private_tests`,
`generated_tests`, `solutions` = {language: [codes], solution: [sources]}) → `stdin` Problem.

Tests: public, then private, then generated, each `{input: [...], output: [...]}`; the public
ones (the statement's examples) are also `public_tests`, what a repair environment may show the
model. Limits:
`time_limit` ({seconds, nanos}) and `memory_limit_bytes`.

Language: CodeContests keeps the correct solutions of each problem in several languages, each
tagged (1 Python 2, 2 C++, 3 Python 3, 4 Java). The problem's language is the row's own
`language` field when it has one (python, cpp, java: a row filtered for a language), else the
first of Python 3, C++ and Java that has a solution (Python when none does); Problem.solutions
keeps the solutions in that language only (the references `data build` judges). Python 2
solutions are never kept.
"""

from __future__ import annotations

from microcoder.data.formats.common import RowContext, dropped, row_language
from microcoder.data.problem import Problem

SOURCE_LANGUAGES = {3: "python", 2: "cpp", 4: "java"}
"""CodeContests' language codes -> Problem.language, in the order a problem's language is
picked (Python 2, code 1, is not judged)."""


def _tests(row: dict, ctx: RowContext, meta: dict) -> tuple[list[dict[str, str]], int]:
    """(every test, how many of the first are the public ones)."""
    tests = []
    public = 0
    for name in ("public_tests", "private_tests", "generated_tests"):
        group = row.get(name) or {}
        if not isinstance(group, dict):
            raise ctx.error(
                name, f"expected {{input: [...], output: [...]}}, got {type(group).__name__}"
            )
        inputs = group.get("input") or []
        outputs = group.get("output") or []
        if len(inputs) != len(outputs):
            raise ctx.error(name, f"{len(inputs)} inputs but {len(outputs)} outputs")
        for x, y in zip(inputs, outputs, strict=True):
            if isinstance(x, str) and isinstance(y, str):
                tests.append({"input": x, "output": y})
            else:
                dropped(meta, "not text")
        if name == "public_tests":
            public = len(tests)  # the first ones are the statement's examples
    if not tests:
        raise ctx.error("public_tests", "empty: the row has no tests")
    return tests, public


def _solutions(row: dict, ctx: RowContext) -> tuple[str, list[str]]:
    """(the problem's language, its solutions in that language)."""
    block = row.get("solutions") or {}
    codes = block.get("language") or [] if isinstance(block, dict) else []
    sources = block.get("solution") or [] if isinstance(block, dict) else []
    by_language: dict[str, list[str]] = {}
    for code, source in zip(codes, sources, strict=False):
        language = SOURCE_LANGUAGES.get(code)
        if language and isinstance(source, str) and source.strip():
            by_language.setdefault(language, []).append(source)
    if row.get("language") not in (None, ""):
        language = row_language(row, ctx)
    else:
        order = [lang for lang in SOURCE_LANGUAGES.values() if by_language.get(lang)]
        language = order[0] if order else "python"
    return language, by_language.get(language, [])


def _seconds(value) -> float | None:
    if isinstance(value, dict):
        total = (value.get("seconds") or 0) + (value.get("nanos") or 0) / 1e9
        return total or None
    return None


def convert_codecontests(row: dict, ctx: RowContext) -> Problem:
    """Convert one CodeContests row."""
    name = ctx.require(row, "name", str)
    description = ctx.require(row, "description", str)
    meta: dict = {}
    tests, public = _tests(row, ctx, meta)
    language, solutions = _solutions(row, ctx)
    memory = row.get("memory_limit_bytes")
    return Problem(
        id=name,
        kind="stdin",
        prompt=description,
        tests=tests,
        public_tests=[dict(t) for t in tests[:public]],
        time_limit_s=_seconds(row.get("time_limit")),
        memory_mb=int(memory) >> 20 if isinstance(memory, int) and memory > 0 else None,
        difficulty=str(row.get("difficulty") or ""),
        source="CodeContests",
        solutions=solutions,
        language=language,
        meta={**meta, "solution": solutions[0] if solutions else ""},
    )

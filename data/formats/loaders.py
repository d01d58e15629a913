"""`load_problems(path)`: read any supported problem file into normalized Problem records;
`iter_problems(path)` streams them row by row (the run's problem store, data/store.py).

Formats (auto-detected from the first row; force one with `format=`):

| format            | rows look like                                                  |
|-------------------|-----------------------------------------------------------------|
| `jsonl`           | our own schema (`id`, `kind`, `tests`, ...; see problem.py)     |
| `lcb`             | LiveCodeBench code_generation_lite (`question_content`, ...)    |
| `humaneval`       | HumanEval (`task_id`, `prompt`, `entry_point`, `test`)          |
| `leetcodedataset` | newfacade/LeetCodeDataset (`input_output` list, `entry_point`)  |
| `apps`            | APPS / TACO (`question`, `input_output` JSON); alias `taco`      |
| `rllm`            | rllm / DeepCoder JSON (`problem`, `tests`)                      |
| `codecontests`    | DeepMind CodeContests (`name`, `description`, `public_tests`)   |
| `answer`          | exact answers (`id`, `question`, `answer`): `answer` kind        |

Files are JSONL or a JSON array, optionally `.gz`. With `strict=True` (default) the first bad row
raises ProblemFormatError naming file, line and field; with `strict=False` bad rows are collected
as `Reject`s and a `LoadResult` is returned so a sanity run can count them.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, overload

from microcoder.data.formats.answer import convert_answer
from microcoder.data.formats.apps import convert_apps
from microcoder.data.formats.codecontests import convert_codecontests
from microcoder.data.formats.common import RowContext
from microcoder.data.formats.humaneval import convert_humaneval
from microcoder.data.formats.lcb import convert_lcb
from microcoder.data.formats.leetcodedataset import convert_leetcodedataset
from microcoder.data.formats.names import FORMAT_ALIASES, FORMAT_CHOICES
from microcoder.data.formats.rllm import convert_rllm
from microcoder.data.formats.rows import iter_rows
from microcoder.data.problem import Problem, ProblemFormatError, validate_problem


def _convert_own(row: dict, ctx: RowContext) -> Problem:
    return validate_problem(row, ctx.source, ctx.line)


CONVERTERS: dict[str, Callable[[dict, RowContext], Problem]] = {
    "jsonl": _convert_own,
    "lcb": convert_lcb,
    "humaneval": convert_humaneval,
    "leetcodedataset": convert_leetcodedataset,
    "apps": convert_apps,
    "taco": convert_apps,
    "rllm": convert_rllm,
    "codecontests": convert_codecontests,
    "answer": convert_answer,
}
FORMATS = tuple(CONVERTERS)


def detect_format(row: object) -> str | None:
    """Name the format a row belongs to, or None when no known format matches."""
    if not isinstance(row, dict):
        return None
    if "kind" in row and "tests" in row:
        return "jsonl"
    if {"name", "description", "public_tests"} <= row.keys():
        return "codecontests"
    if "question_content" in row and "question_id" in row:
        return "lcb"
    if isinstance(row.get("input_output"), list) and "entry_point" in row:
        return "leetcodedataset"
    if {"task_id", "prompt", "entry_point", "test"} <= row.keys():
        return "humaneval"
    if "input_output" in row and "question" in row:
        return "apps"
    if "problem" in row and "tests" in row:
        return "rllm"
    if {"question", "answer"} <= row.keys():
        return "answer"
    return None


@dataclass
class Reject:
    """One row that could not be loaded, and why."""

    source: str
    line: int | None
    field: str
    reason: str


@dataclass
class LoadResult:
    """What a lenient (`strict=False`) load returns."""

    format: str
    problems: list[Problem] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    dropped_tests: Counter = field(default_factory=Counter)
    """Tests dropped from rows that were kept, by reason (e.g. LeetCodeDataset's `Error:` outputs)."""

    def reject_reasons(self) -> Counter:
        """Rejects counted by `field: reason` (reasons cut at the first parenthesis)."""
        return Counter(f"{r.field}: {r.reason.split(' (')[0]}" for r in self.rejects)


def _resolve_format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        fmt = FORMAT_ALIASES.get(fmt, fmt)
        if fmt not in CONVERTERS:
            near = difflib.get_close_matches(fmt, FORMAT_CHOICES, n=1, cutoff=0.5)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ValueError(
                f"unknown format {fmt!r}; {hint}choose one of {', '.join(FORMAT_CHOICES)}"
            )
        return fmt
    unreadable = None
    for line, row in iter_rows(path):
        if isinstance(row, ProblemFormatError):
            unreadable = unreadable or row  # the first, said if no row can be read at all
            continue
        found = detect_format(row)
        if found is None:
            keys = sorted(row)[:12] if isinstance(row, dict) else type(row).__name__
            raise ProblemFormatError(
                str(path),
                line,
                "<row>",
                f"unrecognised row (keys {keys}); name its format: data.format = one of "
                f"{', '.join(FORMATS)} in a run's config (format= to load_problems)",
            )
        return found
    if unreadable is not None:
        raise unreadable
    raise ProblemFormatError(str(path), None, "<file>", "no rows to detect the format from")


def _iter_checked(
    path: Path, fmt: str
) -> Iterator[tuple[int | None, Problem | ProblemFormatError]]:
    """(position, Problem) per row of `path` in format `fmt` (resolved), or (position, the
    row's ProblemFormatError) for a bad row; a duplicate id is a bad row."""
    convert = CONVERTERS[fmt]
    seen: set[str] = set()
    for line, row in iter_rows(path):
        ctx = RowContext(str(path), line)
        try:
            if isinstance(row, ProblemFormatError):
                raise row
            if not isinstance(row, dict):
                raise ctx.error("<row>", f"expected a JSON object, got {type(row).__name__}")
            problem = convert(row, ctx)
            if fmt != "jsonl":  # re-check what a converter built against the schema
                problem = validate_problem(asdict(problem), ctx.source, line)
            if problem.id in seen:
                raise ctx.error("id", f"duplicate id {problem.id!r}; ids must be unique in a file")
        except ProblemFormatError as e:
            yield line, e
            continue
        seen.add(problem.id)
        yield line, problem


def iter_problems(path: str | Path, format: str = "auto") -> Iterator[tuple[int, Problem]]:
    """Stream `(position, Problem)` over `path` (any format `load_problems` reads) without
    holding the file's problems: the strict loader's checks row by row, so the first bad row
    (or an id repeated in the file) raises ProblemFormatError naming file:line and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such problem file")
    for line, item in _iter_checked(path, _resolve_format(path, format)):
        if isinstance(item, ProblemFormatError):
            raise item
        yield line, item


def _load(path: Path, fmt: str, strict: bool) -> LoadResult:
    result = LoadResult(format=_resolve_format(path, fmt))
    for _line, item in _iter_checked(path, result.format):
        if isinstance(item, ProblemFormatError):
            if strict:
                raise item
            result.rejects.append(Reject(item.source, item.line, item.field_name, item.message))
            continue
        result.dropped_tests.update(item.meta.get("dropped_tests") or {})
        result.problems.append(item)
    return result


@overload
def load_problems(
    path: str | Path, format: str = "auto", *, strict: Literal[True] = True
) -> list[Problem]: ...
@overload
def load_problems(
    path: str | Path, format: str = "auto", *, strict: Literal[False]
) -> LoadResult: ...
def load_problems(path, format="auto", *, strict=True):
    """Load every problem in `path` (JSONL or JSON array, optionally .gz).

    strict=True: return the problems; the first bad row raises ProblemFormatError (file:line,
    field, how to fix). strict=False: return a LoadResult with the problems, the rejected rows
    with reasons, and counts of tests dropped from kept rows.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such problem file")
    result = _load(path, format, strict)
    return result.problems if strict else result

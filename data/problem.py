"""The one normalized problem record every loader produces and the judge consumes.

Kinds (LiveCodeBench's conventions):
- `stdin`: a program reads `input` on stdin and must print `output`.
- `functional`: a `class Solution` method or top-level function named `fn_name`; each test's
  `input` holds one JSON value per line (one per argument), `output` one JSON value.
- `assert`: each test is `{"code": ...}`, Python run after the solution in its namespace
  (HumanEval/MBPP style); any failed assert or exception fails the test.
- `answer`: not a program: the model replies with a final answer (math style, e.g.
  `\\boxed{42}`); `tests` holds one `{input: "", output: EXPECTED}`. The sandbox never runs it:
  the reward function scores it (`executor.reward`; by default sandbox/rewards/answer.py
  `exact_answer`, a normalised exact match). Loaded from `{"id", "question", "answer"}` rows
  (data/formats/answer.py).

Languages (`language`): `python` (the default), `cpp` (compiled with `g++ -O2 -std=c++17`) or
`java` (`javac`, run on the JVM); C++ and Java problems are `stdin` problems (the program is
compiled once per answer, then run per test: sandbox/languages.py). Rows without the field are
Python, so files and stores written before it load unchanged.

Visible tests (`public_tests`): the statement's own examples where the source marks them
(LiveCodeBench `public_test_cases`, CodeContests `public_tests`), shaped like `tests`. They are
also in `tests` (the judge's reward runs every test); a multi-turn environment
(actors/environments/repair.py) shows the model its program's run on them and never on the
others. Empty where the source marks none (APPS, TACO, HumanEval, LeetCode, rllm, synthetic);
rows and stores written before the field load with it empty.

Problems may declare a comparison mode (`compare`) or a checker program (`checker`); see
sandbox/compare.py. No torch import here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("stdin", "functional", "assert", "answer")
JUDGED_KINDS = ("stdin", "functional", "assert")
"""The kinds the sandbox runs as programs; `answer` is scored by the reward function alone."""
LANGUAGES = ("python", "cpp", "java")
"""The languages a program may be in; only `stdin` problems may be in a language but Python."""
COMPARE_MODES = ("default", "case-insensitive-yesno", "unordered-tokens", "any-of", "checker")


class ProblemFormatError(ValueError):
    """A bad input row, named by file, line and field so the user can fix it."""

    def __init__(self, source: str, line: int | None, field_name: str, message: str):
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: field '{field_name}': {message}")
        self.source = source
        self.line = line
        self.field_name = field_name
        self.message = message


@dataclass
class Problem:
    id: str
    """Unique id within the dataset."""
    kind: str
    """`stdin`, `functional`, `assert` or `answer` (KINDS)."""
    prompt: str
    """The statement shown to the model."""
    tests: list[dict[str, str]]
    """stdin/functional: [{input, output}]; assert: [{code}]; answer: [{input: "", output:
    the expected answer}]."""
    fn_name: str = ""
    """Entry point of functional problems (method of `Solution`, or a top-level function)."""
    starter_code: str = ""
    """Code the statement starts from (e.g. the `class Solution` signature)."""
    time_limit_s: float | None = None
    """Per-test wall-clock limit in seconds; None = the judge's default."""
    memory_mb: int | None = None
    """Address-space limit in MiB; None = the judge's default."""
    difficulty: str = ""
    platform: str = ""
    date: str = ""
    source: str = ""
    """Where the row came from (dataset name)."""
    compare: str = "default"
    """Output comparison mode (see COMPARE_MODES)."""
    checker: str = ""
    """Python source of a checker program (argv: input, expected, actual files; exit 0 = accept)."""
    prelude: str = ""
    """Code run before the solution in its namespace (e.g. LeetCode's ListNode/TreeNode helpers)."""
    solutions: list[str] = field(default_factory=list)
    """Reference programs (full source, judged like a model's answer) where the source ships
    them; `microcoder data build` judges them against `tests` and drops problems whose references
    all fail. Empty = no reference."""
    language: str = "python"
    """The programs' language (LANGUAGES): the model is asked for it, extraction takes its
    fence, the judge compiles and runs it; `cpp` and `java` need `kind = "stdin"`."""
    public_tests: list[dict[str, str]] = field(default_factory=list)
    """The statement's examples as tests (the source's public tests, shaped like `tests`, also
    among `tests`): what a repair environment may show the model. Empty: none marked."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Anything else a loader wants to keep (reference solution, tags)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


def _require(row: dict, name: str, types, source: str, line: int | None):
    if name not in row:
        raise ProblemFormatError(source, line, name, "missing")
    value = row[name]
    if not isinstance(value, types):
        want = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise ProblemFormatError(source, line, name, f"expected {want}, got {type(value).__name__}")
    return value


def _one_of(row: dict, name: str, default: str, allowed, source: str, line: int | None) -> str:
    """`row[name]` (or `default` when absent or empty), refused unless it is one of `allowed`."""
    value = row.get(name) or default
    if value not in allowed:
        raise ProblemFormatError(
            source, line, name, f"'{value}' is not one of {', '.join(allowed)}"
        )
    return value


def _check_tests(
    tests: list, keys: tuple[str, ...], name: str, source: str, line: int | None
) -> None:
    """Every item of `tests` an object with a string under each of `keys`."""
    for i, t in enumerate(tests):
        if not isinstance(t, dict):
            raise ProblemFormatError(source, line, f"{name}[{i}]", "expected an object")
        for k in keys:
            if not isinstance(t.get(k), str):
                raise ProblemFormatError(
                    source, line, f"{name}[{i}].{k}", "missing or not a string"
                )


def validate_problem(row: dict, source: str = "<dict>", line: int | None = None) -> Problem:
    """Build a Problem from a dict in our own JSONL schema, checking every field."""
    if not isinstance(row, dict):
        raise ProblemFormatError(
            source, line, "<row>", f"expected a JSON object, got {type(row).__name__}"
        )
    pid = _require(row, "id", (str, int), source, line)
    kind = _one_of(row, "kind", _require(row, "kind", str, source, line), KINDS, source, line)
    prompt = row.get("prompt", "")
    if not isinstance(prompt, str):
        raise ProblemFormatError(source, line, "prompt", "expected a string")
    tests = _require(row, "tests", list, source, line)
    if not tests:
        raise ProblemFormatError(source, line, "tests", "empty: a problem needs at least one test")
    keys = ("code",) if kind == "assert" else ("input", "output")
    _check_tests(tests, keys, "tests", source, line)
    public = row.get("public_tests") or []
    if not isinstance(public, list):
        raise ProblemFormatError(source, line, "public_tests", "expected a list of tests")
    _check_tests(public, keys, "public_tests", source, line)
    fn_name = row.get("fn_name") or ""
    if kind == "functional" and not fn_name:
        raise ProblemFormatError(
            source, line, "fn_name", "functional problems need the entry point name"
        )
    compare = _one_of(row, "compare", "default", COMPARE_MODES, source, line)
    if compare == "checker" and not row.get("checker"):
        raise ProblemFormatError(
            source, line, "checker", "compare = 'checker' needs the checker's source"
        )
    for name in ("time_limit_s", "memory_mb"):
        v = row.get(name)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0):
            raise ProblemFormatError(source, line, name, f"expected a positive number, got {v!r}")
    solutions = row.get("solutions") or []
    if not isinstance(solutions, list) or not all(isinstance(s, str) for s in solutions):
        raise ProblemFormatError(
            source, line, "solutions", "expected a list of strings (reference programs)"
        )
    language = _one_of(row, "language", "python", LANGUAGES, source, line)
    if language != "python" and kind != "stdin":
        raise ProblemFormatError(
            source, line, "language", f"{language} problems must be stdin problems, not {kind}"
        )
    known = {f for f in Problem.__dataclass_fields__}
    return Problem(
        id=str(pid),
        kind=kind,
        prompt=prompt,
        tests=[{k: t[k] for k in keys} for t in tests],
        fn_name=fn_name,
        starter_code=row.get("starter_code") or "",
        time_limit_s=row.get("time_limit_s"),
        memory_mb=row.get("memory_mb"),
        difficulty=str(row.get("difficulty") or ""),
        platform=str(row.get("platform") or ""),
        date=str(row.get("date") or ""),
        source=str(row.get("source") or ""),
        compare=compare,
        checker=row.get("checker") or "",
        prelude=row.get("prelude") or "",
        solutions=list(solutions),
        language=language,
        public_tests=[{k: t[k] for k in keys} for t in public],
        meta={**(row.get("meta") or {}), **{k: v for k, v in row.items() if k not in known}},
    )

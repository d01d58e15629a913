"""Input files of `microcoder judge`: problems (any loader format) and solutions JSONL."""

from __future__ import annotations

import json
from pathlib import Path

from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import Problem, ProblemFormatError


def load_problem_file(path: str, fmt: str = "auto") -> dict[str, Problem]:
    """Problems by id, through data/formats/loaders.py (our JSONL and the other formats it knows)."""

    if not Path(path).is_file():
        raise ProblemFormatError(path, None, "<file>", "no such file")
    return {p.id: p for p in load_problems(path, format=fmt)}


def read_solutions(path: str, problems: dict[str, Problem]) -> list[dict]:
    """Rows {problem_id, code, id}; a bad row raises ProblemFormatError naming file:line:field."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ProblemFormatError(path, n, "<row>", f"not JSON ({e})") from None
            if not isinstance(row, dict):
                raise ProblemFormatError(path, n, "<row>", "expected a JSON object")
            pid = row.get("problem_id")
            if not isinstance(pid, (str, int)):
                raise ProblemFormatError(path, n, "problem_id", "missing or not a string")
            if str(pid) not in problems:
                raise ProblemFormatError(
                    path, n, "problem_id", f"{pid!r} is not in the problem file"
                )
            code = row.get("code")
            if code is not None and not isinstance(code, str):
                raise ProblemFormatError(path, n, "code", "expected a string (or null: no code)")
            sid = row.get("id", row.get("solution_id", f"{path}:{n}"))
            rows.append({"problem_id": str(pid), "code": code, "id": str(sid)})
    return rows

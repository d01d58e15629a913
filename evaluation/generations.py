"""Precomputed generations (`microcoder eval --generations FILE`), judged without a model.

JSONL, one sample per line:
    {"problem_id": ..., "sample_index": 0, "text": "...reply..."}   code extracted as in training
                                                   (under EvalSettings.reasoning)
    {"problem_id": ..., "sample_index": 0, "code": "..."}           code used as is (null: none)
LiveCodeBench's own output files are read too (a JSON array or JSONL of rows with
`question_id` and `code_list`): sample i of a problem is `code_list[i]`.
For a problem of a kind the sandbox does not run (`answer`), nothing is extracted: `text` (or
`code`) is the reply the reward function scores, whole.
A bad line, a duplicate (problem_id, sample_index) or an unknown problem id raises
ProblemFormatError naming file:line.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from microcoder.data.problem import ProblemFormatError
from microcoder.sandbox import extract


@dataclass(frozen=True)
class Generation:
    """One precomputed sample."""

    problem_id: str
    sample_index: int
    code: str | None
    """The code to judge (None: the reply has none, or is unfinished; a failed sample); for a
    kind the sandbox does not run, the whole reply, scored by the reward function."""
    line: int
    """Line (or array index + 1) it came from."""
    unfinished: str = ""
    """Why the reply is unfinished (cut inside its reasoning or final code block: verdict
    `unfinished`, sandbox/extract.py); "" when it is not."""


def _rows(path: Path):
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as e:
            raise ProblemFormatError(str(path), None, "<file>", f"not a JSON array ({e})") from None
        yield from enumerate(rows, 1)
        return
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except ValueError as e:
            raise ProblemFormatError(str(path), n, "<row>", f"not JSON ({e})") from None


def _expand(row, src: str, n: int) -> list[tuple[str, int, str | None, bool]]:
    """(problem_id, sample_index, text or code, is_text) of one row."""
    if not isinstance(row, dict):
        raise ProblemFormatError(src, n, "<row>", "expected a JSON object")
    if "code_list" in row and "question_id" in row:  # LiveCodeBench output row
        codes = row["code_list"]
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ProblemFormatError(src, n, "code_list", "expected a list of strings")
        return [(str(row["question_id"]), i, c, False) for i, c in enumerate(codes)]
    pid = row.get("problem_id")
    if not isinstance(pid, (str, int)) or isinstance(pid, bool):
        raise ProblemFormatError(src, n, "problem_id", "missing or not a string")
    idx = row.get("sample_index")
    if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
        raise ProblemFormatError(src, n, "sample_index", "missing or not an integer >= 0")
    if "code" in row:
        if row["code"] is not None and not isinstance(row["code"], str):
            raise ProblemFormatError(src, n, "code", "expected a string (or null: no code)")
        return [(str(pid), idx, row["code"], False)]
    if not isinstance(row.get("text"), str):
        raise ProblemFormatError(
            src, n, "text", "missing: give the reply as `text` or the program as `code`"
        )
    return [(str(pid), idx, row["text"], True)]


def read_generations(
    path: str | Path,
    problem_ids: Collection[str],
    reasoning: str = "auto",
    replies: Collection[str] = (),
    languages: Mapping[str, str] | None = None,
) -> list[Generation]:
    """Every sample of the file (code extracted from `text` with the training extractor under
    `reasoning`, the resolved `prompt.reasoning`; `auto`: decided per reply). `replies`: the ids
    of problems whose samples are replies, not programs (kinds the sandbox does not run): kept
    whole. `languages`: Problem.language by id (absent: python), whose fence extraction
    prefers."""

    path = Path(path)
    if not path.is_file():
        raise ProblemFormatError(str(path), None, "<file>", "no such generations file")
    out: list[Generation] = []
    seen: dict[tuple[str, int], int] = {}
    for n, row in _rows(path):
        for pid, idx, body, is_text in _expand(row, str(path), n):
            if pid not in problem_ids:
                raise ProblemFormatError(
                    str(path), n, "problem_id", f"{pid!r} is not in the problem file"
                )
            if (pid, idx) in seen:
                raise ProblemFormatError(
                    str(path),
                    n,
                    "sample_index",
                    f"({pid!r}, {idx}) already given on line {seen[(pid, idx)]}; indices must be unique",
                )
            seen[(pid, idx)] = n
            if pid in replies:
                out.append(Generation(pid, idx, body, n))
                continue
            language = (languages or {}).get(pid, "python")
            found = extract(body, reasoning, language=language) if is_text else None
            code = found.code if found is not None else body
            if code is not None and not code.strip():
                code = None  # an empty program: nothing to run, a failed sample
            unfinished = found.reason if found is not None and found.status == "unfinished" else ""
            out.append(Generation(pid, idx, code, n, unfinished))
    return out

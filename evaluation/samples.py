"""samples.jsonl: one line per judged (problem, sample, budget), written as results arrive.

Each batch of lines is written with one write() and fsync'ed, so a killed evaluation loses at
most the batch being written; `--resume` reads the file back, skips every key already judged and
tolerates (and cuts off) a torn last line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

Key = tuple[str, int, "int | None"]
"""(problem_id, sample_index, max_tokens): one judged sample at one budget."""


@dataclass
class SampleRecord:
    """One sample of one problem at one token budget, judged."""

    problem_id: str
    sample_index: int
    max_tokens: int | None
    """The budget this record is at; None for precomputed generations (--generations)."""
    verdict: str
    """AC WA TLE MLE RE CE SE (OLE where the judge has it); WA with no code; `unfinished` when
    the reply was cut inside its reasoning or its final code block (not judged)."""
    passed: bool
    """True iff the verdict is AC."""
    first_failed: int | None
    """Index of the first failing test (None when accepted or nothing ran)."""
    code: str | None
    """The extracted code that was judged (None: the reply had no code, or was unfinished); for
    a kind the sandbox does not run (`answer`), the whole reply the reward function scored."""
    tokens: int | None
    """Response tokens at this budget (None when unknown: precomputed generations)."""
    finish_reason: str | None
    """vLLM's finish reason at this budget ("stop", "length"); None when unknown."""
    tests_passed: int = 0
    """Tests passed before the first failure (all of them when accepted)."""
    tests_total: int = 0
    """Tests the problem has."""
    message: str = ""
    """The judge's short reason (first 200 characters); for a reply scored by the reward
    function, its reward and components (`reward 1, formatted 1`)."""
    turn: int | None = None
    """`--max-turns` evaluations: the turn (1..N) whose program this is (the last turn's once
    the trajectory ended earlier); None for a single-turn evaluation. A sample's turns are
    written together, so a resume finds all or none of them."""

    @property
    def key(self) -> Key:
        return (self.problem_id, self.sample_index, self.max_tokens)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_dict(cls, row: dict) -> SampleRecord:
        """A record from its JSON object; ValueError when a required field is missing."""
        if not isinstance(row, dict):
            raise ValueError("expected a JSON object")
        missing = [f for f in ("problem_id", "sample_index", "verdict", "passed") if f not in row]
        if missing:
            raise ValueError(f"missing field(s) {', '.join(missing)}")
        optional = dict.fromkeys(("max_tokens", "first_failed", "code", "tokens", "finish_reason"))
        known = cls.__dataclass_fields__
        return cls(**{**optional, **{k: v for k, v in row.items() if k in known}})


def read_samples(path: str | Path) -> tuple[list[SampleRecord], int]:
    """Records of a samples.jsonl and the byte length of its intact part. A torn tail (text
    after the last newline, or a last line that is not a record) is left out; a bad line
    elsewhere raises ValueError naming file:line."""
    data = Path(path).read_bytes()
    lines = data.split(b"\n")[:-1]  # the piece after the last newline is torn (or empty)
    records = []
    good = 0
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                records.append(SampleRecord.from_dict(json.loads(line)))
            except (ValueError, TypeError) as e:
                if n == len(lines):
                    break
                raise ValueError(
                    f"{path}:{n}: not a sample record ({e}); fix or delete that line"
                ) from None
        good += len(line) + 1
    return records, good


class SamplesWriter:
    """Appends records to samples.jsonl (one write + fsync per batch)."""

    def __init__(self, path: str | Path, keep_bytes: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if keep_bytes is not None:
            os.ftruncate(self._fd, keep_bytes)  # cut a torn tail off before appending
        else:
            os.ftruncate(self._fd, 0)

    def append(self, records: Iterable[SampleRecord]) -> None:
        data = "".join(r.to_json() + "\n" for r in records).encode()
        if not data:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

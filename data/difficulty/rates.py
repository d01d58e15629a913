"""The rates file of the difficulty filter (`microcoder data filter --rates FILE`): one JSONL line
per measured problem, appended (and fsync'ed) as problems finish, so a second run with the same
file measures only the problems it lacks. A torn last line (a killed run) is ignored.

    {"id": "p1", "passed": 3, "samples": 8, "rate": 0.375, "model": "/abs/model",
     "temperature": 1.0, "max_tokens": 256}

Pure (no Ray, no model): reading, writing, and the planner that says what is left to measure.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from microcoder.data.problem import Problem

IDENTITY = ("model", "temperature", "max_tokens")
"""Fields of a rate line that must match the current run for the line to be reused."""


@dataclass
class PassRate:
    """One problem's measured pass rate: `passed` of `samples` samples were accepted."""

    id: str
    """The problem id."""
    passed: int
    """Samples accepted by the judge."""
    samples: int
    """Samples drawn (K)."""
    model: str | None = None
    """Resolved model folder that drew them (None: given by hand, e.g. a fixture)."""
    temperature: float | None = None
    """Sampling temperature of the draw."""
    max_tokens: int | None = None
    """Token budget of each sample."""

    @property
    def rate(self) -> float:
        """passed / samples."""
        return self.passed / self.samples

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "rate": self.rate}, ensure_ascii=False)

    @classmethod
    def from_dict(cls, row: dict, where: str) -> PassRate:
        """A rate from its JSON object; ValueError naming `where` when it is not one."""
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object")
        try:
            out = cls(
                id=str(row["id"]),
                passed=int(row["passed"]),
                samples=int(row["samples"]),
                model=row.get("model"),
                temperature=row.get("temperature"),
                max_tokens=row.get("max_tokens"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"{where}: not a rate line ({e!r}); needs id, passed, samples"
            ) from None
        if not 0 <= out.passed <= out.samples or out.samples < 1:
            raise ValueError(f"{where}: need 0 <= passed <= samples and samples >= 1")
        return out


def read_rates(path: str | Path) -> dict[str, PassRate]:
    """{id: rate} of a rates file (missing file: {}). A later line for the same id wins; a torn
    or unreadable LAST line is left out; a bad line elsewhere raises ValueError (file:line)."""
    p = Path(path)
    if not p.exists():
        return {}
    lines = p.read_text().split("\n")
    torn = lines[-1]  # text after the last newline: a torn write (or "")
    lines = lines[:-1]
    out: dict[str, PassRate] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rate = PassRate.from_dict(json.loads(line), f"{p}:{n}")
        except ValueError as e:
            if n == len(lines) and not torn:
                break
            raise ValueError(f"{e}; fix or delete that line") from None
        out[rate.id] = rate
    return out


def append_rates(path: str | Path, rates: Iterable[PassRate]) -> None:
    """Append lines with one write() + fsync; a torn tail left by a killed run is cut first."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(r.to_json() + "\n" for r in rates).encode()
    if not data:
        return
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            os.lseek(fd, 0, os.SEEK_SET)
            keep = os.read(fd, size).rfind(b"\n") + 1
            os.ftruncate(fd, keep)
        os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def check_identity(rates: dict[str, PassRate], identity: dict, path: str | Path) -> None:
    """Refuse to reuse lines drawn by another model / temperature / budget (hand-given lines,
    with those fields null, are accepted)."""
    for r in rates.values():
        row = asdict(r)
        diff = [k for k in IDENTITY if row[k] is not None and row[k] != identity.get(k)]
        if diff:
            shown = ", ".join(f"{k} {row[k]!r} there, {identity.get(k)!r} now" for k in diff)
            raise ValueError(
                f"--rates {path}: problem {r.id!r} was measured with other settings ({shown}); "
                "use the same settings or another --rates file"
            )


def to_measure(problems: Sequence[Problem], rates: dict[str, PassRate], samples: int) -> list:
    """The problems that still need measuring: no line yet, or a line with fewer than `samples`
    samples. Order kept."""
    return [p for p in problems if p.id not in rates or rates[p.id].samples < samples]


def measure_sample(problems: Sequence[Problem], share: float, seed: int) -> list[Problem]:
    """The seeded `share` of the problems to measure when the rest is predicted: the ceil(share
    * N) problems with the smallest hash of (seed, id). Stable: the same seed gives the same
    sample, and a larger share contains a smaller one."""
    if not 0 < share <= 1:
        raise ValueError(f"--measure-share {share}: give a share in (0, 1]")
    n = math.ceil(share * len(problems))
    ranked = sorted(problems, key=lambda p: hashlib.sha256(f"{seed}:{p.id}".encode()).digest())
    chosen = {p.id for p in ranked[:n]}
    return [p for p in problems if p.id in chosen]

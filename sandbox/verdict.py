"""The typed verdict record the judge returns for one solution."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

UNFINISHED = "unfinished"
"""The verdict of a response cut inside its reasoning or its final code block, or at the token
cap before a closed block (sandbox/extract.py): never judged, reward 0. For the conditional truncation mask it is non-incorrect
(learner/algorithm/grpo.py: INCORRECT_VERDICTS, docs/architecture.md §5)."""

VERDICTS = ("AC", "WA", "TLE", "MLE", "OLE", "RE", "CE", "SE", UNFINISHED)
"""AC accepted; WA wrong answer (also: no code); TLE time limit; MLE memory limit; OLE output
limit (the program wrote more than the test's output cap, see ExecutorConfig.output_limit_kb);
RE runtime error; CE does not compile; SE sandbox/system fault (never the program's fault: do
not score it); `unfinished` the response was cut before its answer was complete (UNFINISHED)."""


@dataclass
class Verdict:
    """One judged solution."""

    verdict: str
    """One of VERDICTS."""
    passed: int
    """Tests passed (with early exit: those run before the first failure)."""
    total: int
    """Tests the problem has."""
    time_s: float = 0.0
    """Wall-clock seconds the program ran, summed over its tests."""
    cpu_s: float = 0.0
    """CPU seconds the program used, summed over its tests."""
    first_failed: int | None = None
    """Index of the first failing test (None when AC or not reached)."""
    message: str = ""
    """Short human-readable reason (comparison mismatch, exception, limit)."""
    stdout: str = ""
    """Excerpt (≤ 300 chars) of the program's stdout on the failing / last test."""
    stderr: str = ""
    """Excerpt (≤ 300 chars, the tail) of the program's stderr on the failing / last test."""
    reward: float | None = 0.0
    """1.0 for AC else 0.0, or passed/total with partial credit; None for SE (do not score);
    0.0 for `unfinished` (no test ran)."""
    problem_id: str = ""
    solution_id: str = ""
    job_id: int = -1
    """The id `JudgePool.submit` returned."""
    attempts: int = 1
    """Runs it took (> 1 after a sandbox fault was retried)."""
    tag: Any = field(default=None, compare=False)
    """Whatever the caller passed to submit (not serialised)."""

    def to_dict(self) -> dict:
        """JSON-ready dict (without `tag`)."""
        d = asdict(self)
        d.pop("tag")
        return d


def score(verdict: str, passed: int, total: int, partial_credit: bool) -> float | None:
    """The reward for a verdict under the configured scheme."""
    if verdict == "SE":
        return None
    if partial_credit:
        return passed / total if total else 0.0
    return 1.0 if verdict == "AC" else 0.0


def unfinished_verdict(total: int, reason: str) -> Verdict:
    """The verdict of an unfinished response (sandbox/extract.py): no test run, reward 0."""
    return Verdict(UNFINISHED, 0, total, message=f"unfinished: {reason}", reward=0.0)

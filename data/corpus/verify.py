"""Reference verification: judge each problem's own reference programs against its own tests.

A problem whose shipped references all fail its tests has broken tests (or a broken reference:
either way the reward it gives is noise), so the build drops it. The judge is the sandbox pool
(`microcoder.sandbox.JudgePool`, bubblewrap isolation, ExecutorConfig defaults unless a config is
given), the same one that scores rollouts. References are judged one at a time per problem: the
next one only when the one before failed, at most `max_per_problem`. A verdict of SE (a sandbox
fault, never the program's) does not count as a failure: a problem whose judged references all
hit SE is kept and counted as `unverified`. C++ and Java references are compiled and judged like
a model's programs (sandbox/languages.py); a host without their compiler fails at the start,
naming the package to install.

The sandbox package is imported inside `verify_references` (data/ does not need it otherwise).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from microcoder.data.problem import Problem


@dataclass
class ReferenceCheck:
    """What judging one problem's references found."""

    problem_id: str
    """The problem's id."""
    verdicts: list[str] = field(default_factory=list)
    """One verdict (AC, WA, TLE, ..., SE) per reference judged, in order."""
    message: str = ""
    """The judge's message on the last failing reference (why it failed), or empty."""

    @property
    def passed(self) -> bool:
        """True when any judged reference was accepted."""
        return "AC" in self.verdicts

    @property
    def unverified(self) -> bool:
        """True when no reference got a real verdict (every one hit a sandbox fault)."""
        return bool(self.verdicts) and all(v == "SE" for v in self.verdicts)


class _Progress:
    """`verify: 120/2317 judged (4.1/s) AC 110 WA 8 ...` on stderr every `every_s` seconds."""

    def __init__(self, total: int, enabled: bool, every_s: float = 10.0):
        self.total = total
        self.enabled = enabled
        self.every_s = every_s
        self.done = 0
        self.counts = Counter()
        self.start = self.last = time.perf_counter()

    def update(self, verdict: str) -> None:
        self.done += 1
        self.counts[verdict] += 1
        now = time.perf_counter()
        if self.enabled and (now - self.last >= self.every_s or self.done == self.total):
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            tally = " ".join(f"{k} {n}" for k, n in self.counts.most_common())
            print(
                f"verify: {self.done}/{self.total} problems judged ({rate:.1f}/s) {tally}",
                file=sys.stderr,
                flush=True,
            )


def verify_references(
    problems: list[Problem],
    *,
    max_per_problem: int = 1,
    config: Any = None,
    progress: bool = True,
    pool_factory: Callable[[Any], Any] | None = None,
) -> dict[str, ReferenceCheck]:
    """Judge the references of every problem that has some; `{problem id: ReferenceCheck}`.

    Problems without `solutions` are not in the result. `config`: an ExecutorConfig (None = its
    defaults). `pool_factory(config)` builds the judge pool (default JudgePool; a test may pass
    another object with `submit(problem, code, solution_id, tag)` and `as_completed()`). Raises
    SandboxUnavailable (with the fix) when the sandbox cannot start.
    """
    if max_per_problem < 1:
        raise ValueError(f"max_per_problem must be >= 1, got {max_per_problem}")
    todo = [p for p in problems if p.solutions]
    checks = {p.id: ReferenceCheck(p.id) for p in todo}
    if not todo:
        return checks
    if pool_factory is None:
        from microcoder.sandbox import ExecutorConfig, JudgePool  # data/ is below the sandbox
        from microcoder.sandbox.languages import check_compilers

        check_compilers({p.language for p in todo}, "the references")  # C++ / Java need theirs
        config = config or ExecutorConfig()
        pool_factory = JudgePool
    bar = _Progress(len(todo), progress)
    with pool_factory(config) as pool:
        for p in todo:
            pool.submit(p, p.solutions[0], f"{p.id}#0", (p, 0))
        for v in pool.as_completed():
            problem, k = v.tag
            check = checks[problem.id]
            check.verdicts.append(v.verdict)
            if v.verdict not in ("AC", "SE"):
                check.message = v.message
            limit = min(max_per_problem, len(problem.solutions))
            if v.verdict != "AC" and k + 1 < limit:
                pool.submit(
                    problem, problem.solutions[k + 1], f"{problem.id}#{k + 1}", (problem, k + 1)
                )
                continue
            bar.update(v.verdict)
    return checks

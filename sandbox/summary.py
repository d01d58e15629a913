"""Terminal output of the judge CLI: a progress bar and the per-verdict summary table."""

from __future__ import annotations

import sys
import time
from collections import Counter

from microcoder.sandbox.verdict import VERDICTS, Verdict


class Progress:
    """A one-line progress bar on stderr (only when it is a terminal)."""

    def __init__(self, total: int, enabled: bool = True):
        self.total = total
        self.enabled = enabled
        self.done = 0
        self.counts: Counter = Counter()
        self.start = time.perf_counter()

    def update(self, v: Verdict) -> None:
        self.done += 1
        self.counts[v.verdict] += 1
        if not self.enabled:
            return
        width = 30
        filled = width * self.done // max(1, self.total)
        rate = self.done / max(1e-9, time.perf_counter() - self.start)
        tally = " ".join(f"{k}:{self.counts[k]}" for k in VERDICTS if self.counts[k])
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{rate:.1f}/s {tally}   "
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def summary_table(verdicts: list[Verdict], elapsed_s: float, problems=None) -> str:
    """Counts per verdict, tests run, throughput."""
    counts = Counter(v.verdict for v in verdicts)
    n = len(verdicts)
    tests = sum(v.passed + (1 if v.first_failed is not None else 0) for v in verdicts)
    lines = [f"{'verdict':<10} {'count':>7} {'share':>7}"]
    for k in VERDICTS:
        if counts[k]:
            lines.append(f"{k:<10} {counts[k]:>7} {100 * counts[k] / max(1, n):>6.1f}%")
    lines.append(f"{'total':<10} {n:>7}")
    lines.append(
        f"{n} solutions, {tests} tests run in {elapsed_s:.2f} s: "
        f"{n / max(elapsed_s, 1e-9):.1f} solutions/s, {tests / max(elapsed_s, 1e-9):.1f} tests/s"
    )
    return "\n".join(lines)

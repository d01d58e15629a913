"""Paired rounds of `microcoder bench judge`: each round runs ours and the baselines back to back
on the same solutions, so a ratio is taken between runs a few seconds apart (a shared machine's
load moves from minute to minute, much less from one run to the next). The order alternates
(ours first in even rounds, last in odd ones), so a load that rises or falls through a round
favours neither side. Reported per ratio: the median over rounds and its spread (min, max, and
the interquartile range q1-q3).
"""

from __future__ import annotations

import os
import resource
import statistics

RATIOS = (
    "speedup_vs_lcb",
    "speedup_vs_lcb_cpu",
    "ours_vs_floor",
    "ours_vs_floor_cpu",
    "lcb_vs_floor",
    "lcb_vs_floor_cpu",
)
"""Per-round ratios whose median and spread are reported (LCB's only when LCB ran)."""


class CpuMeter:
    """CPU seconds (user + sys) spent since start(): `host` = this process (the judge's host
    threads, LCB's and the floor's parent side), `children` = every descendant this process has
    reaped (getrusage RUSAGE_CHILDREN: sandboxes, fork servers and the programs they reaped;
    LCB's interpreter and its pool; the floor's workers). A descendant counts once it and its
    parents were waited for, so each phase must end with its processes reaped."""

    def __init__(self) -> None:
        self.h0 = _usage(resource.RUSAGE_SELF)
        self.c0 = _usage(resource.RUSAGE_CHILDREN)

    def read(self) -> tuple[float, float]:
        """(host, children) CPU seconds since the meter was made."""
        return (
            _usage(resource.RUSAGE_SELF) - self.h0,
            _usage(resource.RUSAGE_CHILDREN) - self.c0,
        )


def _usage(who: int) -> float:
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime


def order(round_index: int, sides: list[str]) -> list[str]:
    """The order the sides run in this round: as given in even rounds, reversed in odd ones."""
    return list(sides) if round_index % 2 == 0 else list(reversed(sides))


def spread(values: list[float]) -> dict:
    """median, min, max, q1, q3 of one ratio over rounds (q1 = q3 = the value for one round)."""
    values = sorted(values)
    if len(values) > 1:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return {
        "median": statistics.median(values),
        "min": values[0],
        "max": values[-1],
        "q1": q1,
        "q3": q3,
    }


def summarise(rounds: list[dict]) -> dict:
    """The medians of every figure over rounds, plus `spread` for each ratio in RATIOS."""
    keys = [k for k in rounds[0] if all(isinstance(r.get(k), (int, float)) for r in rounds)]
    row = {k: statistics.median(r[k] for r in rounds) for k in keys}
    row["spread"] = {k: spread([r[k] for r in rounds]) for k in RATIOS if k in keys}
    return row


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (what `uptime` prints)."""
    return [round(x, 2) for x in os.getloadavg()]


def format_spread(s: dict | None, unit: str = "x") -> str:
    """`7.90x [7.64-10.42, IQR 7.77-9.16]`, or "-" when the ratio was not measured."""
    if not s:
        return "-"
    return (
        f"{s['median']:.2f}{unit} [{s['min']:.2f}-{s['max']:.2f}, IQR {s['q1']:.2f}-{s['q3']:.2f}]"
    )

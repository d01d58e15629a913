"""Which problems an evaluation covers: a date window on `problem.date` and platform / difficulty
lists, as LiveCodeBench's `--start_date/--end_date` and its per-platform/difficulty tables.

Dates: the first ten characters must read YYYY-MM-DD (LiveCodeBench's contest_date is
"2023-08-21T00:00:00", LeetCodeDataset's estimated_date "2024-08-01"); both ends of the window
are inclusive. A problem without a readable date is excluded by any date filter (and counted as
such). Platform and difficulty compare case-insensitively; a problem without one is "unknown".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from microcoder.data.problem import Problem

UNKNOWN = "unknown"
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


def problem_day(date: str) -> str | None:
    """ "YYYY-MM-DD" of a problem's date string, or None when it has no readable date."""
    m = _DATE.match((date or "").strip())
    if not m:
        return None
    year, month, day = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return m.group(0)


def parse_day(value: str, option: str) -> str:
    """A --from/--to value as "YYYY-MM-DD"; ValueError naming the option otherwise."""
    day = problem_day(value)
    if day is None or len(value.strip()) != 10:
        raise ValueError(f"{option} {value!r}: expected a date YYYY-MM-DD, e.g. 2024-08-01")
    return day


def platform_of(problem: Problem) -> str:
    return (problem.platform or "").strip().lower() or UNKNOWN


def difficulty_of(problem: Problem) -> str:
    return (problem.difficulty or "").strip().lower() or UNKNOWN


def parse_list(value: str | None) -> list[str]:
    """ "LeetCode, atcoder" -> ["leetcode", "atcoder"]; None or "" -> [] (no filter)."""
    return [v.strip().lower() for v in (value or "").split(",") if v.strip()]


@dataclass
class Selection:
    """The problems a filter kept, and how many each criterion excluded (first failing one)."""

    kept: list[Problem]
    excluded: dict[str, int] = field(default_factory=dict)
    """{"undated": n, "date": n, "platform": n, "difficulty": n}: only criteria in use."""

    def summary(self, total: int) -> str:
        parts = [f"{n} {why}" for why, n in self.excluded.items() if n]
        out = f"{len(self.kept)} of {total} problems selected"
        return out + (f" (excluded: {', '.join(parts)})" if parts else "")


def select_problems(
    problems: Sequence[Problem],
    date_from: str | None = None,
    date_to: str | None = None,
    platforms: Sequence[str] = (),
    difficulties: Sequence[str] = (),
) -> Selection:
    """Problems inside [date_from, date_to] (inclusive; either may be None) whose platform and
    difficulty are in the given lists (empty list = any)."""
    lo = parse_day(date_from, "--from") if date_from else None
    hi = parse_day(date_to, "--to") if date_to else None
    if lo and hi and lo > hi:
        raise ValueError(f"--from {lo} is after --to {hi}; swap them")
    plats = {p.lower() for p in platforms}
    diffs = {d.lower() for d in difficulties}
    excluded: dict[str, int] = {}
    if lo or hi:
        excluded.update(undated=0, date=0)
    if plats:
        excluded["platform"] = 0
    if diffs:
        excluded["difficulty"] = 0
    kept = []
    for p in problems:
        why = _exclusion(p, lo, hi, plats, diffs)
        if why is None:
            kept.append(p)
        else:
            excluded[why] += 1
    return Selection(kept, excluded)


def _exclusion(p: Problem, lo, hi, plats, diffs) -> str | None:
    if lo or hi:
        day = problem_day(p.date)
        if day is None:
            return "undated"
        if (lo and day < lo) or (hi and day > hi):
            return "date"
    if plats and platform_of(p) not in plats:
        return "platform"
    if diffs and difficulty_of(p) not in diffs:
        return "difficulty"
    return None

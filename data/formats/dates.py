"""Problem dates as the loaders store them, read as calendar periods.

Loaders keep a source's date text as it came (`Problem.date`): LeetCodeDataset `2024-08-04`,
LiveCodeBench `2023-08-21T00:00:00`, TACO / APPS a day, a month or a year, some sets a Unix
timestamp. `parse_date` turns any of them into a `DatePeriod` (the first and last day it may
mean), so a date cutoff can be applied conservatively: a row dated only `2024` may fall after a
cutoff of 2024-06-01, and is treated as after it.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

_YMD = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:$|[T\s])")
_YM = re.compile(r"^(\d{4})[-/.](\d{1,2})$")
_Y = re.compile(r"^(\d{4})$")
_EPOCH = re.compile(r"^\d{9,13}(?:\.\d+)?$")


@dataclass(frozen=True)
class DatePeriod:
    """The calendar days a stored date may mean (one day, a month or a year)."""

    first: date
    """Earliest day the row may be from."""
    last: date
    """Latest day the row may be from (== first for a full date)."""
    precision: str
    """`day`, `month` or `year`."""

    def month(self) -> str:
        """`YYYY-MM` of the first day (the stats table's bucket)."""
        return f"{self.first.year:04d}-{self.first.month:02d}"


def _period(y: int, m: int | None = None, d: int | None = None) -> DatePeriod | None:
    try:
        if d is not None and m is not None:
            day = date(y, m, d)
            return DatePeriod(day, day, "day")
        if m is not None:
            return DatePeriod(date(y, m, 1), date(y, m, calendar.monthrange(y, m)[1]), "month")
        return DatePeriod(date(y, 1, 1), date(y, 12, 31), "year")
    except ValueError:
        return None


def parse_date(text: str) -> DatePeriod | None:
    """The period a stored date means; None for an empty or unreadable one.

    Accepts `YYYY-MM-DD` (also with `/` or `.`, and with a time after `T` or a space),
    `YYYY-MM`, `YYYY`, and Unix timestamps in seconds or milliseconds.
    """
    text = (text or "").strip()
    if not text:
        return None
    if m := _YMD.match(text):
        return _period(int(m[1]), int(m[2]), int(m[3]))
    if m := _YM.match(text):
        return _period(int(m[1]), int(m[2]))
    if m := _Y.match(text):
        return _period(int(m[1]))
    if _EPOCH.match(text):
        seconds = float(text)
        if seconds > 1e11:  # milliseconds
            seconds /= 1000
        day = datetime.fromtimestamp(seconds, tz=UTC).date()
        return DatePeriod(day, day, "day")
    return None


def parse_cutoff(text: str) -> date:
    """`--cutoff-date YYYY-MM-DD` as a date; ValueError saying the format otherwise."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--cutoff-date {text!r}: expected YYYY-MM-DD (e.g. 2024-08-01)") from None

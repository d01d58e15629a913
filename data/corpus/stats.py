"""`microcoder data stats FILE [--json]`: what a problem file holds, counted.

Counts by source, kind, platform, difficulty, tests per problem (buckets 1, 2-5, 6-10, 11-50,
51-100, >100) and date (by year-month when the file spans at most 24 months, else by year;
`none` for an undated row, `unreadable` for a date data/formats/dates.py cannot read). Any loader format;
rows the loader rejects are counted, not fatal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from microcoder.data.formats.dates import parse_date
from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import Problem, ProblemFormatError

FIELDS = ("source", "kind", "platform", "difficulty", "tests", "date")
TEST_BUCKETS = ((1, "1"), (5, "2-5"), (10, "6-10"), (50, "11-50"), (100, "51-100"))


def bucket_of(n: int) -> str:
    """The tests-per-problem bucket of `n` tests."""
    for top, name in TEST_BUCKETS:
        if n <= top:
            return name
    return ">100"


def _date_keys(problems: list[Problem]) -> list[str]:
    periods = [parse_date(p.date) for p in problems]
    months = {d.month() for d in periods if d is not None}
    by_month = len(months) <= 24
    keys = []
    for p, d in zip(problems, periods, strict=True):
        if d is None:
            keys.append("unreadable" if p.date.strip() else "none")
        else:
            keys.append(d.month() if by_month and d.precision != "year" else str(d.first.year))
    return keys


def count_problems(problems: list[Problem]) -> dict[str, dict[str, int]]:
    """`{field: {value: count}}` for every FIELDS entry (values sorted; test buckets in order)."""
    columns = {
        "source": [p.source or "none" for p in problems],
        "kind": [p.kind for p in problems],
        "platform": [p.platform or "none" for p in problems],
        "difficulty": [p.difficulty or "none" for p in problems],
        "tests": [bucket_of(len(p.tests)) for p in problems],
        "date": _date_keys(problems),
    }
    order = [name for _, name in TEST_BUCKETS] + [">100"]
    out = {}
    for name, values in columns.items():
        c = Counter(values)
        keys = [k for k in order if k in c] if name == "tests" else sorted(c)
        out[name] = {k: c[k] for k in keys}
    return out


def format_table(stats: dict) -> str:
    """The counts as one text table per field, with shares."""
    total = stats["problems"]
    lines = [f"{total} problems ({stats['rejected']} rows rejected by the loader)"]
    if stats.get("first_reject"):
        lines.append(f"first rejected row: {stats['first_reject']}")
    for name in FIELDS:
        lines += ["", f"{name:<20} {'count':>7} {'share':>7}"]
        for value, n in stats["counts"][name].items():
            lines.append(f"  {value[:18]:<18} {n:>7} {100 * n / max(total, 1):>6.1f}%")
    return "\n".join(lines)


def _why(reject) -> str:
    where = f"{reject.source}:{reject.line}" if reject.line is not None else reject.source
    return f"{where}: field '{reject.field}': {reject.reason}"


def file_stats(path: str, format: str = "auto") -> dict:
    """`{"file", "format", "problems", "rejected", "first_reject", "counts":
    count_problems(...)}`; `first_reject` says where and why the first bad row failed (None
    when every row loaded). `format` names the loader (data/formats/loaders.py); "auto"
    detects it from the first row."""
    result = load_problems(path, format, strict=False)
    return {
        "file": str(path),
        "format": result.format,
        "problems": len(result.problems),
        "rejected": len(result.rejects),
        "first_reject": _why(result.rejects[0]) if result.rejects else None,
        "counts": count_problems(result.problems),
    }


def cli_main(args: argparse.Namespace) -> int:
    """`microcoder data stats FILE [--format NAME] [--json]`; 0 ok, 2 unreadable file."""
    try:
        stats = file_stats(args.file, getattr(args, "format", "auto"))
    except (ProblemFormatError, OSError, ValueError) as e:
        print(f"microcoder data stats: {e}", file=sys.stderr)
        if isinstance(e, ProblemFormatError) and "name its format" in str(e):
            print(f"here: microcoder data stats --format NAME {args.file}", file=sys.stderr)
        return 2
    print(json.dumps(stats, indent=1) if args.json else format_table(stats))
    return 0

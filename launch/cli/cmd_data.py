"""`microcoder data build|filter|stats`: assemble a clean training set (MicroCoder-Dataset's
method). Parsing only here; each subcommand's work is imported when it runs: data/corpus/build.py,
data/corpus/stats.py, and launch/jobs/data_filter.py (over data/difficulty/).
"""

from __future__ import annotations

import argparse
import importlib

from microcoder.launch.cliargs import add_format_argument
from microcoder.launch.jobs.data_filter import add_arguments  # stdlib-only at its top


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data",
        help="build a clean training set: verify, deduplicate, decontaminate, date-split, "
        "difficulty-filter; corpus stats",
        description="Training-data tools. `build` turns any mix of problem files into one clean "
        "JSONL with a report of what each stage removed; `filter` keeps the hard-but-solvable "
        "band by measured pass rate; `stats` counts a problem file.",
    )
    data_sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)
    _register_build(data_sub)
    _register_filter(data_sub)
    _register_stats(data_sub)


def _subcommand(
    sub: argparse._SubParsersAction, name: str, module: str, **texts: str
) -> argparse.ArgumentParser:
    """The parser of `data NAME` (`texts`: its help and description), whose `func` imports
    `module` (a full dotted name) when it runs and calls its `cli_main(args)`."""

    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(module).cli_main(args)

    p = sub.add_parser(name, **texts)
    p.set_defaults(func=run)
    return p


def _register_build(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(
        sub,
        "build",
        "microcoder.data.corpus.build",
        help="validate, verify references, deduplicate, decontaminate and date-split sources",
        description="Read any mix of loader formats (bad rows are reported, not fatal), run the "
        "stages validate -> verify references -> exact duplicates -> near-duplicates -> "
        "decontamination -> date cutoff, write our JSONL and a report.",
    )
    p.add_argument("--sources", nargs="+", required=True, metavar="FILE", help="problem files")
    p.add_argument(
        "--eval-sets", nargs="*", default=[], metavar="FILE", help="decontaminate against"
    )
    p.add_argument("--cutoff-date", help="drop rows dated after YYYY-MM-DD")
    p.add_argument("--near-dup-threshold", type=float, default=0.7, help="Jaccard (default 0.7)")
    p.add_argument("--out", default="data-build.jsonl", help="the clean JSONL")
    p.add_argument("--report", default="data-build-report", help="report folder")
    p.add_argument("--skip-verify", action="store_true", help="do not judge reference programs")
    p.add_argument(
        "--verify-max", type=int, default=1, metavar="N", help="references judged per problem"
    )
    p.add_argument("--workers", type=int, default=0, help="sandbox workers (default: CPU count)")


def _register_filter(sub: argparse._SubParsersAction) -> None:
    # Its body is in launch/jobs/ (it drives the eval path's actors, which data/ may not import).
    p = _subcommand(
        sub,
        "filter",
        "microcoder.launch.jobs.data_filter",
        help="difficulty filter: measure pass rates with a model, calibrate a predictor, select",
        description="Measure each problem's pass rate (K samples through the eval path), fit a "
        "predictor on the problems' metadata, and select the hard-but-solvable band.",
    )
    add_arguments(p)


def _register_stats(sub: argparse._SubParsersAction) -> None:
    p = _subcommand(
        sub,
        "stats",
        "microcoder.data.corpus.stats",
        help="counts by source, kind, platform, difficulty, test count and date",
        description="Count a problem file (any loader format) by source, kind, platform, "
        "difficulty, tests per problem and date.",
    )
    p.add_argument("file", help="problem file")
    add_format_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

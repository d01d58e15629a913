"""`microcoder status [RUN_DIR | --run DIR] [--json] [--watch S]`: one screen about a run.

A live run is asked through its dashboard (`run_dir/dashboard.json` names the address); a
stopped or finished one is read from its metrics.jsonl, config.toml and launcher.log.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "status",
        help="pools, version, rates, buffer, staleness, idle time and errors of a run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--run", metavar="DIR", help="run directory (default: the newest under runs/)")
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR", help="the same as --run DIR")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument("--watch", type=float, metavar="S", default=0.0, help="refresh every S seconds")
    p.set_defaults(func=run)


def live_status(run_dir: Path, timeout_s: float = 5.0) -> dict | None:
    """The launcher's /api/status if run_dir/dashboard.json names a dashboard that answers."""
    info_path = run_dir / "dashboard.json"
    if not info_path.exists():
        return None
    try:
        url = json.loads(info_path.read_text())["url"].rstrip("/") + "/api/status"
        with urllib.request.urlopen(url, timeout=timeout_s) as res:
            return json.loads(res.read())
    except (OSError, ValueError, KeyError):
        return None  # the launcher is gone (killed): fall back to the files


def get_status(run_dir: Path) -> dict:
    from microcoder.launch.monitor.status_sources import status_from_files

    return live_status(run_dir) or status_from_files(run_dir)


def run(args) -> int:
    from microcoder.launch.monitor.status_view import render_status
    from microcoder.launch.run_dirs import newest_run

    if args.run and args.run_dir and Path(args.run) != Path(args.run_dir):
        print(f"status: two runs given ({args.run}, {args.run_dir}); pass one", file=sys.stderr)
        return 2
    given = args.run or args.run_dir
    run_dir = Path(given) if given else newest_run("runs")
    if run_dir is None:
        print("status: no run found under runs/ (pass --run DIR)", file=sys.stderr)
        return 2
    if not run_dir.is_dir():
        print(f"status: {run_dir} is not a directory (pass --run RUN_DIR)", file=sys.stderr)
        return 2
    while True:
        st = get_status(run_dir)
        text = json.dumps(st, indent=2) if args.json else render_status(st)
        if args.watch > 0 and not args.json:
            print("\033[2J\033[H" + text, flush=True)
        else:
            print(text, flush=True)
        if args.watch <= 0:
            return 0
        time.sleep(args.watch)

"""`microcoder bench data --problems N [N ...]`: data at scale (issue 45). The tiny config is
launched for real to step 1, first on the synthetic source (the baseline) and then on a file of
N generated problems of `--row-kb` KB each (problems.py; written once under `--workdir`, reused),
all in one invocation, back to back. Per launch (launches.py): seconds from the launch to the
buffer's first handed-out prompt and to step 1, the peak RSS of the launcher (driver), the
buffer actor and the executor (rss.py, sampled every 0.2 s), and an executor's start (its
construction to `ready()` in a fresh process). Goals, each file against the baseline: step 1 at
most 60 s later; executor peak at most 200 MB above; driver and buffer at most 300 MB above.

`--no-launch`: only the files and the executor start (a quick look at 10^6 rows).
The near-duplicate bench that was `bench data` until issue 45 is `bench dedup` (bench/dedup.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DESCRIPTION = (
    "data at scale: the tiny config launched to step 1 on N generated problems vs the synthetic "
    "source: time to first prompt and step 1, peak RSS of driver/buffer/executor, executor start"
)
GOALS = {"step1_s": 60.0, "executor": 200.0, "driver": 300.0, "buffer": 300.0}
"""How much above the synthetic launch each figure of a file launch may be (seconds, MB)."""
BASELINE = "synthetic"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--problems", type=int, nargs="+", default=[100_000], help="rows per file (100000)"
    )
    p.add_argument("--row-kb", type=float, default=4.0, help="size of one row in KB (4)")
    p.add_argument(
        "--workdir",
        default=str(Path(tempfile.gettempdir()) / "microcoder-bench-data"),
        help="where the files (reused) and the runs go (TMPDIR/microcoder-bench-data)",
    )
    p.add_argument("--config", default="configs/tiny-cpu.toml", help="the launched config")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="more launch settings"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the generated rows")
    p.add_argument("--timeout-s", type=float, default=1800.0, help="per launch (1800)")
    p.add_argument(
        "--baseline-runs",
        type=int,
        choices=(1, 2),
        default=2,
        help="synthetic launches: 2 (default) = first and last, the goals against their mean",
    )
    p.add_argument(
        "--no-launch",
        action="store_true",
        help="only generate the files and time an executor's start on each",
    )


def measure(args, source: str, run_dir: Path) -> dict[str, Any]:
    from microcoder.bench.data.launches import executor_start, launch_once

    row: dict[str, Any] = {}
    if not args.no_launch:
        print(f"bench data: launching on {source}", file=sys.stderr, flush=True)
        row.update(launch_once(args.config, source, run_dir, args.set, args.timeout_s))
    from microcoder.data.store import STORE_NAME

    store = run_dir / STORE_NAME  # the launch's own store, else one kept for the next bench
    if not store.is_file():
        store = run_dir.parent.parent / "stores" / Path(source).stem / STORE_NAME
    start = executor_start(args.config, source, args.set, store)
    row["store_s"] = start.get("store_s")
    row["executor_start_s"] = start.get("seconds")
    row["executor_alone_mb"] = start.get("rss_mb")
    if "error" in start:
        row["executor_start_error"] = start["error"]
    return row


def mean_baseline(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The baseline the goals compare with: each figure's mean over the synthetic launches."""

    def mean(values):
        values = [v for v in values if v is not None]
        return round(sum(values) / len(values), 1) if values else None

    roles = {role for r in runs for role in r.get("peak_mb", {})}
    return {
        "step1_s": mean([r.get("step1_s") for r in runs]),
        "first_prompt_s": mean([r.get("first_prompt_s") for r in runs]),
        "executor_start_s": mean([r.get("executor_start_s") for r in runs]),
        "peak_mb": {role: mean([r.get("peak_mb", {}).get(role) for r in runs]) for role in roles},
    }


def deltas(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Each goal's figure above the baseline, and whether it holds (None when not measured)."""
    out: dict[str, Any] = {}
    for key, limit in GOALS.items():
        if key == "step1_s":
            a = row.get("step1_s")
            b = base.get("step1_s")
        else:
            a = row.get("peak_mb", {}).get(key)
            b = base.get("peak_mb", {}).get(key)
        d = None if a is None or b is None else round(a - b, 1)
        out[key] = {"above": d, "limit": limit, "met": None if d is None else d <= limit}
    return out


def _stop(signum, _frame):
    raise SystemExit(128 + signum)  # a launch in progress is stopped by launch_once's finally


def run(args: argparse.Namespace) -> dict[str, Any]:
    from microcoder.bench.data.launches import prepare_model
    from microcoder.bench.data.problems import problems_file

    signal.signal(signal.SIGTERM, _stop)
    workdir = Path(args.workdir).resolve()
    files = []
    for n in args.problems:
        t0 = time.perf_counter()
        path, reused = problems_file(workdir, n, args.row_kb, args.seed)
        files.append((n, path, reused, time.perf_counter() - t0))
        how = "reused" if reused else f"written in {files[-1][3]:.0f} s"
        print(f"bench data: {path} ({path.stat().st_size / 2**20:.0f} MB, {how})", file=sys.stderr)
    if not args.no_launch:
        prepare_model(args.config, args.set)  # a warm start is not part of any launch's figures
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs = workdir / "runs"
    baselines = [measure(args, BASELINE, runs / f"{stamp}-synthetic")]
    rows = []
    for n, path, reused, gen_s in files:
        row = measure(args, str(path), runs / f"{stamp}-{n}")
        size = path.stat().st_size
        row.update(
            source=str(path),
            problems=n,
            file_mb=round(size / 2**20, 1),
            row_kb=round(size / n / 1024, 2),
            generated_s=None if reused else round(gen_s, 1),
        )
        rows.append(row)
    if args.baseline_runs == 2:
        baselines.append(measure(args, BASELINE, runs / f"{stamp}-synthetic-again"))
    for b in baselines:
        b.update(source=BASELINE, problems=None)
    base = mean_baseline(baselines)
    for row in rows:
        row["above_baseline"] = deltas(row, base)
    goals = [g["met"] for r in rows for g in r["above_baseline"].values()]
    return {
        "config": args.config,
        "settings": args.set,
        "launched": not args.no_launch,
        "baselines": baselines,
        "baseline": base,
        "files": rows,
        "goals": GOALS,
        "goals_met": None if None in goals or not goals else all(goals),
    }


def _f(v, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def format_table(result: dict[str, Any]) -> str:
    head = (
        f"{'source':>10} {'row KB':>6} {'file MB':>8} {'1st prompt s':>12} {'step 1 s':>8} "
        f"{'driver MB':>9} {'buffer MB':>9} {'executor MB':>11} {'exec start s (MB)':>17}"
    )
    lines = [head]
    baselines = result["baselines"]
    order = [baselines[0], *result["files"], *baselines[1:]]
    for r in order:
        peak = r.get("peak_mb", {})
        name = BASELINE if r["problems"] is None else f"{r['problems']:,}"
        start = f"{_f(r.get('executor_start_s'), '{:.2f}')} ({_f(r.get('executor_alone_mb'), '{:.0f}')})"
        lines.append(
            f"{name:>10} {_f(r.get('row_kb'), '{:.2f}'):>6} {_f(r.get('file_mb')):>8} "
            f"{_f(r.get('first_prompt_s')):>12} {_f(r.get('step1_s')):>8} "
            f"{_f(peak.get('driver'), '{:.0f}'):>9} {_f(peak.get('buffer'), '{:.0f}'):>9} "
            f"{_f(peak.get('executor'), '{:.0f}'):>11} {start:>17}"
        )
    lines.append("")
    if not result["launched"]:
        lines.append("(--no-launch: executor start and its RSS then, in a fresh process, only)")
        return "\n".join(lines)
    lines.append(
        f"above the synthetic launch{'es' if len(baselines) > 1 else ''}"
        f"{' (their mean)' if len(baselines) > 1 else ''}; goals: step 1 <= 60 s, executor"
    )
    lines.append("<= 200 MB, driver and buffer <= 300 MB:")
    for r in result["files"]:
        parts = []
        for key, g in r["above_baseline"].items():
            unit = "s" if key == "step1_s" else "MB"
            verdict = {True: "met", False: "NOT met", None: "-"}[g["met"]]
            parts.append(f"{key.replace('_s', '')} {_f(g['above'])} {unit} ({verdict})")
        lines.append(f"  {r['problems']:,}: " + "; ".join(parts))
    for r in order:
        if r.get("returncode") not in (0, None):
            lines.append(f"  launch on {r['source']} exited {r['returncode']}: see {r['log']}")
        if r.get("executor_start_error"):
            lines.append(f"  executor start on {r['source']} failed: {r['executor_start_error']}")
    lines.append(f"goals met: {result['goals_met']}")
    return "\n".join(lines)

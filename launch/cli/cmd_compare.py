"""`microcoder compare RECIPE --arms A,B,... [--seeds N] [--set k=v ...] [--out DIR] [--resume]
[--parallel N]`: every arm × seed through the real pipeline, then compare.json, compare.md and
the training-curve plots (docs/compare.md)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from microcoder.launch.cliargs import add_recipe_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="run arms (algorithm presets, ablations) x seeds and compare their training curves",
    )
    add_recipe_arguments(p, "max_steps=20")
    p.add_argument(
        "--arms",
        required=True,
        help="comma list: presets (grpo, dapo, microcoder, paper), no-mask, mask-all, mask-cond, "
        "clip-sym, clip-higher, no-kl, calibrated, T=0.6, kl=0.001, rho=0.3, "
        "off_policy=none|tis|seq-tis|mask|geo-reject, or NAME:KEY=VALUE;KEY=VALUE",
    )
    p.add_argument(
        "--seeds", default="3", help="N (seeds 0..N-1) or a comma list, e.g. 0,5 (default 3)"
    )
    p.add_argument("--out", default=None, help="output folder (default runs/compare-<timestamp>)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the arm-seeds that finished in --out, run the others (again)",
    )
    p.add_argument(
        "--parallel",
        default="auto",
        metavar="N|auto",
        help="arm-seeds run at once on this machine: a number, checked against the CPUs and "
        "GPUs each run plans, or auto (default): as many as fit, one after another when only "
        "one does or on a shared cluster",
    )
    p.set_defaults(func=run)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def parse_seeds(text: str) -> list[int]:
    """`3` -> [0, 1, 2]; `0,5` -> [0, 5]."""
    try:
        if "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        else:
            seeds = list(range(int(text)))
    except ValueError:
        raise ValueError(f"--seeds {text!r}: give a count (3) or a comma list (0,5)") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: give at least one seed, each once")
    return seeds


def parse_parallel(text: str) -> int | None:
    """`auto` -> None (as many as fit); `2` -> 2."""
    if text.strip().lower() == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--parallel {text!r}: give a number (2) or auto") from None


def run(args: argparse.Namespace) -> int:
    from microcoder.launch.compare.arms import ArmError, parse_arms
    from microcoder.launch.compare.plan import plan_grid, prepare_models
    from microcoder.launch.compare.runner import CompareError, run_jobs

    if args.resume and not args.out:
        say("compare: --resume needs --out DIR (the folder of the compare to continue)")
        return 2
    out = Path(args.out or f"runs/compare-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        arms = parse_arms(args.arms)
        seeds = parse_seeds(args.seeds)
        parallel = parse_parallel(args.parallel)
        grid = plan_grid(Path(args.config), arms, seeds, args.overrides, out, parallel)
    except (ArmError, ValueError, CompareError) as err:
        say(f"compare: {err}")
        return 2
    say(
        f"compare: {len(arms)} arm(s) x {len(seeds)} seed(s) = {len(grid.jobs)} runs into {out}, "
        f"{grid.why}"
    )
    for spread in grid.variance:
        say(f"compare: {spread}")
    for note in grid.notes:
        say(f"compare: note: {note}")

    def on_term(_signum, _frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    from microcoder.launch.compare.child import launch_job, stop_all

    results = []
    interrupted = False
    try:
        try:
            prepare_models(grid, say)
        except (OSError, RuntimeError) as err:  # a missing model folder, a failed warm start
            say(f"compare: {type(err).__name__}: {err}; nothing ran")
            return 1
        results = run_jobs(
            grid.jobs,
            launch_job,
            resume=args.resume,
            envs=grid.envs,
            say=say,
            on_interrupt=stop_all,
        )
    except CompareError as err:
        say(f"compare: {err}")
        return 2
    except KeyboardInterrupt:
        interrupted = True
        say("compare: interrupted; writing the report of what finished (--resume continues)")
    finally:
        signal.signal(signal.SIGTERM, old)
    return finish(args, grid, arms, seeds, out, results, interrupted)


def finish(args, grid, arms, seeds, out, results, interrupted: bool) -> int:
    """Write the report, print the held-out table and where things are; the exit status."""

    from microcoder.launch.compare.report import build_report, not_finished, write_report
    from microcoder.launch.compare.runner import COUNTED

    by_label = {f"{r.arm} seed{r.seed}": r for r in results}
    report = build_report(
        Path(args.config),
        arms,
        grid.overrides,
        seeds,
        args.overrides,
        grid.jobs,
        by_label,
        variance=grid.variance,
    )
    paths = write_report(out, report)
    md = (out / "compare.md").read_text()
    print(md.split("## Other metrics")[0].rstrip(), flush=True)
    say(f"compare: wrote {', '.join(str(p) for p in paths[:2])} and {len(paths) - 2} plot(s)")
    bad = [r for r in report["runs"] if r["status"] not in COUNTED]
    for r in bad:
        say(f"compare: {r['arm']} seed {r['seed']}: {not_finished(r)}")
    if interrupted:
        return 130
    return 1 if bad else 0

"""`microcoder bench pipeline`: how much the asynchronous pipeline buys, two ways, in one run.

1. Real tiny workload: the same config (default configs/tiny-cpu.toml, same seed) launched
   twice through the real launcher, with buffer.max_staleness = 0 (synchronous GRPO) and then
   = --async-staleness; per run: wall seconds per step, samples/s, idle fraction of each pool,
   staleness (bench/pipeline/real.py). `speedup` = async samples/s / sync samples/s. Both runs
   evaluate the held-out split at the same steps (start and end by default): sampled and greedy
   pass rates at start and end, and async - sync (bench/pipeline/heldout.py): async must not
   cost learning.
2. Simulated stage costs: generator, executor and learner actors whose work is a sleep of a
   configurable cost per batch, on the real buffer host (bench/pipeline/sim.py), for 1, 2, 4, 8
   generators: achieved learner steps/s against the ideal bound 1 / max(stage seconds per batch).
   Goal: ratio >= 0.9. Sleeps cost no CPU, so this half is robust on a shared machine. Per
   generator it also reports the CPU its process used (seconds, per group, fraction of its
   loop's wall) and its loop's turns, leases and version polls per second: what the
   coordination itself costs, which on a real node is taken from the engine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from microcoder.launch.cliargs import add_set_argument

DESCRIPTION = (
    "async vs sync pipeline on the tiny config, and simulated stage costs vs the ideal bound"
)

SIM_POINT = (
    ("--sim-staleness", "max_staleness", 2, "max_staleness (>= 1)"),
    ("--sim-steps", "steps", 20, "measured learner steps per point"),
    ("--sim-warmup", "warmup", 4, "learner steps left out per point"),
    ("--batch-size", "batch_size", 16, "groups per learner step"),
    ("--group-size", "group_size", 8, "responses per group"),
)
"""The whole-number settings of each simulated point: (flag, bench/pipeline/sim.py `run_point`
keyword, default, help); `run_point` has no defaults of its own for them. Each flag's value lands in `sim_<keyword>` (the real part has its own
`--warmup`) and goes to `run_simulated` under the keyword (max_staleness at least 1)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    real = parser.add_argument_group("real tiny workload")
    real.add_argument("--config", default="configs/tiny-cpu.toml", help="recipe launched twice")
    real.add_argument("--max-steps", type=int, default=30, help="learner steps per launch")
    real.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="held-out eval every N steps (and at start and end); 0 = only at the "
        "start and the end",
    )
    real.add_argument("--warmup", type=int, default=2, help="first steps left out of the figures")
    real.add_argument("--seed", type=int, default=0, help="seed of both launches")
    real.add_argument(
        "--async-staleness", type=int, default=2, help="max_staleness of the async run"
    )
    add_set_argument(
        real, flag="--real-set", dest="real_set", help="extra --set for both launches (repeatable)"
    )
    real.add_argument("--runs-dir", default="", help="keep the two run directories here")
    real.add_argument("--skip-real", action="store_true", help="only the simulated part")
    sim = parser.add_argument_group("simulated stage costs")
    sim.add_argument("--gen-s", type=float, default=0.8, help="s per batch of one generator")
    sim.add_argument("--judge-s", type=float, default=0.2, help="s per batch of one executor")
    sim.add_argument("--train-s", type=float, default=0.3, help="s per learner step")
    sim.add_argument("--generators", default="1,2,4,8", help="generator counts to measure")
    sim.add_argument("--executors", type=int, default=1, help="simulated executors")
    for flag, keyword, default, text in SIM_POINT:
        sim.add_argument(flag, dest=f"sim_{keyword}", type=int, default=default, help=text)
    sim.add_argument(
        "--sync-before-lease",
        action="store_true",
        help="generators learn the version before leasing prompts (the order "
        "actors/generator.py had until issue 7) instead of right before sampling",
    )
    sim.add_argument("--skip-sim", action="store_true", help="only the real part")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from microcoder.bench.pipeline.real import run_real
    from microcoder.bench.pipeline.sim import StageCosts, run_simulated

    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "load_start": os.getloadavg()[0],
    }
    if not args.skip_sim:
        point = {keyword: getattr(args, f"sim_{keyword}") for _, keyword, _, _ in SIM_POINT}
        point["max_staleness"] = max(1, point["max_staleness"])
        result["simulated"] = run_simulated(
            StageCosts(args.gen_s, args.judge_s, args.train_s),
            [int(n) for n in args.generators.split(",") if n.strip()],
            args.executors,
            **point,
            sync_before_lease=args.sync_before_lease,
        )
    if not args.skip_real:
        keep = bool(args.runs_dir)
        runs_dir = Path(args.runs_dir or tempfile.mkdtemp(prefix="bench-pipeline-"))
        try:
            real = run_real(
                args.config,
                args.max_steps,
                args.warmup,
                args.seed,
                [0, args.async_staleness],
                runs_dir,
                args.real_set,
                eval_every=args.eval_every or args.max_steps,
            )
        finally:
            if not keep:
                shutil.rmtree(runs_dir, ignore_errors=True)
        result["real"] = real
        result.update(headline(real, args.async_staleness))
    result["load_end"] = os.getloadavg()[0]
    return result


def headline(real: dict[str, Any], k: int) -> dict[str, Any]:
    """The top-level figures: samples/s of both runs and their ratio; also the ratio at equal
    learner compute (each run's seconds per step over its learner compute seconds per step),
    which discounts a change of machine load between the two launches; and the held-out pass
    rates of both runs at start and end with async - sync (`heldout_headline`)."""
    from microcoder.bench.pipeline.heldout import heldout_headline

    sync = real["runs"]["0"]
    async_ = real["runs"][str(k)]
    s = sync["samples_per_s"]
    a = async_["samples_per_s"]

    def per_compute(r: dict[str, Any]) -> float:
        return r["s_per_step"] / r["compute_s_mean"] if r["compute_s_mean"] else 0.0

    pa = per_compute(async_)
    return {
        "sync_samples_per_s": s,
        "async_samples_per_s": a,
        "speedup": a / s if s else 0.0,
        "speedup_at_equal_compute": per_compute(sync) / pa if pa else 0.0,
        "async_staleness": k,
        "sync_s_per_step": sync["s_per_step"],
        "async_s_per_step": async_["s_per_step"],
        **heldout_headline(sync, async_),
    }


def format_table(result: dict[str, Any]) -> str:
    from microcoder.bench.pipeline.format import real_table, sim_table
    from microcoder.bench.pipeline.heldout import heldout_table

    lines = [
        f"{result['date']}, {result['cpus']} CPUs, load {result['load_start']:.1f} -> "
        f"{result['load_end']:.1f} (1-min average)"
    ]
    if "real" in result:
        lines += ["", *real_table(result), "", *heldout_table(result)]
    if "simulated" in result:
        lines += ["", *sim_table(result["simulated"])]
    return "\n".join(lines)

"""The simulated half of `microcoder bench pipeline`: stage costs are sleeps, everything else is
real (Ray actors, the BufferHost actor, BufferClient, admission control, the staleness gate).

Each generator needs `gen_s` seconds for one learner batch of prompts, each executor `judge_s`
for one batch of groups, the learner `train_s` per step. With N generators and M executors the
stages take gen_s / N, judge_s / M and train_s per batch, so no schedule can beat
1 / max(stage times) learner steps per second: the ideal pipeline bound. The benchmark measures
how close the real coordination (leases, long polls, admission, version hand-over) gets.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any

import psutil

from microcoder.actors.remote import buffer_host_cls
from microcoder.bench.pipeline.actors import SimExecutor, SimGenerator, SimLearner
from microcoder.data.sources import load_run_problems
from microcoder.launch.config import load_config
from microcoder.launch.run.cluster import init_local_ray


@dataclass(frozen=True)
class StageCosts:
    """Seconds one replica needs for one learner batch (`batch_size` groups) of its stage."""

    gen_s: float
    """One generator generating a batch's worth of groups."""
    judge_s: float
    """One executor judging a batch's worth of groups."""
    train_s: float
    """The learner's optimizer step on one batch."""


def stage_times(costs: StageCosts, generators: int, executors: int) -> dict[str, float]:
    """Seconds per learner batch of each stage with its replicas working in parallel."""
    if generators < 1 or executors < 1:
        raise ValueError("need at least one generator and one executor")
    return {
        "generate": costs.gen_s / generators,
        "judge": costs.judge_s / executors,
        "train": costs.train_s,
    }


def ideal_steps_per_s(times: dict[str, float]) -> float:
    """The pipeline bound: 1 / the slowest stage's seconds per batch."""
    slowest = max(times.values())
    return math.inf if slowest <= 0 else 1.0 / slowest


def bottleneck(times: dict[str, float]) -> str:
    """Name of the slowest stage (the first one on ties, in pipeline order)."""
    return max(times, key=lambda k: times[k])


def default_wave(batch_size: int, generators: int) -> int:
    """Prompts a generator leases at once: the batch shared by the pool, so that admission
    control's in-flight budget is spread over every generator instead of a few big waves."""
    return max(1, math.ceil(batch_size / generators))


def _remote(cls, concurrency: int = 2):
    import ray

    return ray.remote(num_cpus=0, max_concurrency=concurrency)(cls)


def run_point(
    costs: StageCosts,
    generators: int,
    executors: int,
    *,
    batch_size: int,
    group_size: int,
    max_staleness: int,
    warmup: int,
    steps: int,
    sync_before_lease: bool = False,
) -> dict[str, Any]:
    """One configuration on an initialised Ray: fresh buffer and actors, `warmup` + `steps`
    learner steps; returns achieved vs ideal steps/s and where the time went. The bench's
    defaults of the whole-number settings are its flags' (bench/pipeline/__init__.py
    `SIM_POINT`)."""
    import ray

    from microcoder.buffer.client import BufferClient

    warmup = max(1, warmup)  # the last warm-up step marks where the measured window starts
    overrides = [f"buffer.max_staleness={max_staleness}", f"learner.batch_size={batch_size}"]
    cfg = load_config(None, overrides)
    # The simulated actors never tokenize: the statements themselves are the prompts they lease.
    prompts = [(p.id, p.prompt) for p in load_run_problems(cfg.data, cfg.seed)]
    host = buffer_host_cls().remote(
        cfg.buffer, cfg.data, cfg.learner.batch_size, prompts, seed=cfg.seed
    )
    address = ray.get(host.get_address.remote())
    learner = _remote(SimLearner, 4).remote(address, batch_size, costs.train_s)
    wave = default_wave(batch_size, generators)
    gens = [
        _remote(SimGenerator).remote(
            f"sim-gen-{i}",
            address,
            learner,
            group_size,
            costs.gen_s / batch_size,
            wave,
            sync_before_lease=sync_before_lease,
        )
        for i in range(generators)
    ]
    execs = [
        _remote(SimExecutor).remote(f"sim-exec-{i}", address, costs.judge_s / batch_size)
        for i in range(executors)
    ]
    workers = gens + execs
    try:
        ray.get([a.ready.remote() for a in [learner, *workers]])
        host_cpu = _ProcessCpu(ray.get(host.__ray_call__.remote(lambda self: os.getpid())))
        loops = [a.run.remote() for a in workers]
        records = ray.get(learner.run.remote(warmup + steps), timeout=600)
        cpu = {"buffer_host": host_cpu.used(), "learner": ray.get(learner.cpu.remote())}
        for a in workers:
            a.stop.remote()
        done = ray.get(loops, timeout=60)
        with BufferClient(address, owner="bench") as c:
            buf = c.stats()
    finally:
        for a in [learner, *workers]:
            ray.kill(a, no_restart=True)
        try:
            ray.get(host.shutdown.remote(), timeout=10)
        except Exception:
            pass
        ray.kill(host, no_restart=True)
    times = stage_times(costs, generators, executors)
    point = summarize_point(records, done, buf, times, generators, executors, warmup)
    return {**point, "cpu": cpu_figures(done, cpu)}


class _ProcessCpu:
    """CPU seconds another process (an actor of the product, e.g. the buffer host) used since
    this object was made (psutil: user + system, every thread)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.t0 = self._now()

    def _now(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    def used(self) -> float:
        return self._now() - self.t0


def cpu_figures(loops: list[dict[str, Any]], others: dict[str, float]) -> dict[str, Any]:
    """Per generator: CPU seconds of its process over its loop, per group handed in, and as a
    fraction of the loop's wall; its ticks, leases and version polls per second. Then the
    executors', the learner's and the buffer host's CPU seconds."""
    gens = {}
    for x in loops:
        if not x["name"].startswith("sim-gen"):
            continue
        wall = max(x["wall_s"], 1e-9)
        gens[x["name"]] = {
            "cpu_s": x["cpu_s"],
            "wall_s": x["wall_s"],
            "cpu_frac": x["cpu_s"] / wall,
            "groups": x["groups"],
            "cpu_s_per_group": x["cpu_s"] / max(x["groups"], 1),
            "ticks_per_s": x["ticks"] / wall,
            "leases_per_s": x["leases"] / wall,
            "version_polls_per_s": x["version_polls"] / wall,
        }
    executors = {x["name"]: x["cpu_s"] for x in loops if x["name"].startswith("sim-exec")}
    total = sum(g["cpu_s"] for g in gens.values())
    groups = sum(g["groups"] for g in gens.values())
    return {
        "generators": gens,
        "generator_cpu_s": total,
        "generator_cpu_s_per_group": total / max(groups, 1),
        "generator_cpu_frac_mean": sum(g["cpu_frac"] for g in gens.values()) / max(len(gens), 1),
        "executor_cpu_s": executors,
        **{f"{k}_cpu_s": v for k, v in others.items()},
    }


def summarize_point(records, loops, buf, times, generators, executors, warmup) -> dict[str, Any]:
    """Achieved steps/s over the steps after `warmup`, against the ideal bound."""
    measured = records[warmup:]
    window = records[-1]["end"] - records[warmup - 1]["end"] if warmup else 0.0
    achieved = len(measured) / window if window > 0 else 0.0
    ideal = ideal_steps_per_s(times)

    def busy(prefix: str) -> float:
        xs = [x for x in loops if x["name"].startswith(prefix)]
        return sum(x["busy_s"] for x in xs) / max(sum(x["wall_s"] for x in xs), 1e-9)

    return {
        "generators": generators,
        "executors": executors,
        "stage_s": times,
        "bottleneck": bottleneck(times),
        "ideal_steps_per_s": ideal,
        "achieved_steps_per_s": achieved,
        "ratio": achieved / ideal if ideal else 0.0,
        "steps_measured": len(measured),
        "learner_idle_frac": sum(r["wait_s"] for r in measured) / window if window > 0 else 0.0,
        "generator_busy_frac": busy("sim-gen"),
        "executor_busy_frac": busy("sim-exec"),
        "staleness_mean": sum(r["staleness_mean"] for r in measured) / max(len(measured), 1),
        "staleness_max": max((r["staleness_max"] for r in measured), default=0),
        "dropped_stale": buf.get("dropped_stale", 0),
        "invariant_ok": buf.get("invariant_ok", False),
    }


def run_simulated(
    costs: StageCosts, generator_counts: list[int], executors: int = 1, **kw: Any
) -> dict[str, Any]:
    """Every generator count in turn on one local Ray instance (started here if needed)."""
    import ray

    started = not ray.is_initialized()
    if started:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")

        init_local_ray(
            num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
    t0 = time.monotonic()
    try:
        points = [run_point(costs, n, executors, **kw) for n in generator_counts]
    finally:
        if started:
            ray.shutdown()
    return {
        "costs": {"gen_s": costs.gen_s, "judge_s": costs.judge_s, "train_s": costs.train_s},
        "executors": executors,
        **{
            k: kw[k]
            for k in ("batch_size", "group_size", "max_staleness", "warmup", "steps")
            if k in kw
        },
        "points": points,
        "ratio": {str(p["generators"]): p["ratio"] for p in points},
        "wall_s": time.monotonic() - t0,
    }

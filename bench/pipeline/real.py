"""The real half of `microcoder bench pipeline`: the tiny config launched through the real
launcher (`python -m microcoder launch`, a subprocess per run), synchronous (max_staleness = 0)
and asynchronous, summarised from each run's metrics.jsonl.

Per run, over the steps after the warm-up: wall seconds per step (between metrics lines, so the
driver's own work counts, less any held-out evaluation inside the window), samples/s (responses
the learner trained on per second), the idle fraction of each pool and the staleness of the
consumed groups. Learner idle = wait_s / step_s. Generator and executor idle fractions are
reported by the actors cumulatively since they started (PoolTimer); the window's share is
recovered from two records (see `window_idle`). Held-out pass rates at the first and last
evaluation: bench/pipeline/heldout.py.

A warm-started model (model.warmstart) that is not cached yet is built by the first launch;
that happens before its first step, so no per-step figure contains it (`warmstart` says so).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from microcoder.bench.pipeline.heldout import eval_records, eval_seconds, heldout_summary
from microcoder.launch.config import load_config
from microcoder.learner.warmstart.build import find_finished, settings_of


def launch_command(
    config: str,
    run_dir: str,
    max_steps: int,
    max_staleness: int,
    seed: int,
    extra: list[str],
    eval_every: int | None = None,
) -> list[str]:
    """The exact launcher command of one run (the dashboard on a free port: the bench must not
    collide with another run on this machine). `eval_every` = N evaluates the held-out split at
    the start, every N steps and at the end (None: the config's setting)."""
    sets = [f"max_steps={max_steps}", f"buffer.max_staleness={max_staleness}", f"seed={seed}"]
    if eval_every is not None:
        sets.append(f"eval.every={eval_every}")
    sets += ["monitor.dashboard_port=0", *extra]
    cmd = [sys.executable, "-m", "microcoder", "launch", config, "--run-dir", run_dir]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def run_launch(cmd: list[str], run_dir: Path, timeout_s: float) -> list[dict[str, Any]]:
    """Run one launch to its end; its output goes to run_dir/bench-launch.log. Returns the
    records of its metrics.jsonl."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "bench-launch.log"
    with log.open("w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise RuntimeError(
            f"launch exited with {proc.returncode}; command: {' '.join(cmd)}\n"
            f"last lines of {log}:\n{tail}"
        )
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def window_idle(first: dict, last: dict, key: str, t0: float) -> float:
    """A pool's idle fraction between two step records, from its cumulative fractions
    f = idle / (t - t0): (f_last (t_last - t0) - f_first (t_first - t0)) / (t_last - t_first).
    `t0` is when the pool's timers started, estimated as the start of the first step."""
    t1 = first["time"]
    t2 = last["time"]
    if t2 <= t1:
        return float(last.get(key, 0.0))
    idle = last.get(key, 0.0) * (t2 - t0) - first.get(key, 0.0) * (t1 - t0)
    return min(1.0, max(0.0, idle / (t2 - t1)))


def summarize_run(records: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """Figures of one run over its step records after the first `warmup` (at least 1: the last
    warm-up record marks where the window starts)."""
    steps = sorted((r for r in records if r.get("kind") == "step"), key=lambda r: r["step"])
    warmup = max(1, warmup)
    if len(steps) <= warmup:
        raise ValueError(
            f"the run has {len(steps)} steps, not more than the {warmup} warm-up steps: "
            "raise --max-steps or lower --warmup"
        )
    first = steps[warmup - 1]
    window = steps[warmup:]
    last = window[-1]
    evals = eval_records(records)
    eval_s = sum(eval_seconds(r) for r in evals if first["time"] < r["time"] <= last["time"])
    wall = max(last["time"] - first["time"] - eval_s, 1e-9)
    samples = sum(r.get("responses", 0.0) for r in window)
    starts = [steps[0]["time"] - steps[0].get("step_s", 0.0)]
    starts += [r["time"] - eval_seconds(r) for r in evals[:1]]  # the eval at step 0 comes first
    t0 = min(starts)
    rewards = [r.get("reward_mean", 0.0) for r in steps]
    return {
        "steps_measured": len(window),
        "window_s": wall,
        "eval_s_in_window": eval_s,
        "s_per_step": wall / len(window),
        "samples_per_s": samples / wall if wall > 0 else 0.0,
        "learner_idle_frac": sum(r.get("wait_s", 0.0) for r in window)
        / max(sum(r.get("step_s", 0.0) for r in window), 1e-9),
        "generator_idle_frac": window_idle(first, last, "generator_idle_frac", t0),
        "executor_idle_frac": window_idle(first, last, "executor_idle_frac", t0),
        "compute_s_mean": sum(r.get("compute_s", 0.0) for r in window) / len(window),
        "sync_s_mean": sum(r.get("sync_s", 0.0) for r in window) / len(window),
        "staleness_mean": sum(r.get("staleness_mean", 0.0) for r in window) / len(window),
        "staleness_max": max(r.get("staleness_max", 0.0) for r in window),
        "reward_first5": sum(rewards[:5]) / len(rewards[:5]),
        "reward_last5": sum(rewards[-5:]) / len(rewards[-5:]),
        **heldout_summary(records),
    }


def warmstart_state(config: str, extra: list[str]) -> dict[str, Any]:
    """Whether the config warm-starts its model (model.warmstart) and whether a finished warm
    start with exactly its settings is cached in model.path already."""

    cfg = load_config(config, extra)
    if not cfg.model.warmstart:
        return {"warmstart": False, "model": cfg.model.path}
    settings = settings_of(cfg.model.tiny_seed, cfg.warmstart, cfg.prompt)
    found = find_finished(cfg.model.path, settings)
    return {"warmstart": True, "model": cfg.model.path, "cached": found is not None}


def warmstart_build_s(model: str) -> float | None:
    """Seconds the warm start cached in `model` took (its manifest), None if unknown."""
    try:
        return float(json.loads((Path(model) / "warmstart.json").read_text())["result"]["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_real(
    config: str,
    max_steps: int,
    warmup: int,
    seed: int,
    staleness: list[int],
    runs_dir: Path,
    extra: list[str],
    timeout_s: float = 1800.0,
    eval_every: int | None = None,
) -> dict[str, Any]:
    """Launch the config once per `staleness` value, one after the other; summaries by k.
    A missing warm start is announced on stderr; the first launch builds it (before its first
    step, so outside every per-step figure; its launch_wall_s includes it)."""
    ws = warmstart_state(config, extra)
    if ws["warmstart"] and not ws["cached"]:
        print(
            f"bench pipeline: no cached warm start in {ws['model']}; the first launch "
            "(max_staleness 0) builds it first (several minutes, not in the per-step figures)",
            file=sys.stderr,
            flush=True,
        )
    out: dict[str, Any] = {
        "config": config,
        "max_steps": max_steps,
        "warmup": warmup,
        "eval_every": eval_every,
        "warmstart": ws,
        "runs": {},
    }
    for i, k in enumerate(staleness):
        run_dir = runs_dir / f"staleness-{k}"
        cmd = launch_command(config, str(run_dir), max_steps, k, seed, extra, eval_every)
        print(
            f"bench pipeline: launch {i + 1}/{len(staleness)}: {' '.join(cmd[1:])}",
            file=sys.stderr,
            flush=True,
        )
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        records = run_launch(cmd, run_dir, timeout_s)
        out["runs"][str(k)] = {
            **summarize_run(records, warmup),
            "command": "python " + " ".join(cmd[1:]),
            "run_dir": str(run_dir),
            "launch_wall_s": time.monotonic() - t0,
            "built_warmstart": bool(i == 0 and ws["warmstart"] and not ws["cached"]),
            "load_before": load,
            "load_after": os.getloadavg()[0],
        }
    if ws["warmstart"] and not ws["cached"]:
        ws["built_by_first_launch_s"] = warmstart_build_s(ws["model"])
    return out

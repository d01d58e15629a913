"""Plausible step/eval/event records shaped like launch/run/training_loop.py's, for tests of the
dashboard, the exports and `microcoder status` without Ray (deterministic in `step`)."""

from __future__ import annotations

import math
from typing import Any


def synthetic_step(step: int, generators: int = 2, executors: int = 2) -> dict[str, Any]:
    """The fields of one "step" record (without kind/time) at learner step `step` (>= 1)."""
    wave = math.sin(step / 3.0)
    consumed = 8 * step
    hist = {"0": consumed // 2, "1": consumed // 3, "2": consumed - consumed // 2 - consumed // 3}
    depths = {"leased": 4 + step % 3, "unscored": 2 + step % 2, "scoring": 2, "scored": step % 4}
    in_flight = sum(depths.values())
    return {
        "step": step,
        "policy_version": step,
        "version": float(step),
        "reward_mean": min(1.0, 0.1 + 0.03 * step + 0.02 * wave),
        "loss": 0.05 * wave - 0.01,
        "clip_frac": 0.02 + 0.01 * abs(wave),
        "entropy": 1.2 - 0.01 * step,
        "response_len_mean": 40.0 + 2 * step,
        "truncated_frac": 0.05 + 0.05 * abs(wave),
        "masked_frac": 0.01 * abs(wave),
        "looping_frac": 0.02 * abs(wave),
        "grad_norm": 0.8 + 0.1 * wave,
        "tokens_per_s": 900.0 + 50 * wave,
        "gen_tokens_per_s": 2400.0 + 300 * wave,
        "tests_per_s": 150.0 + 20 * wave,
        "generator_idle_frac": 0.1 + 0.05 * abs(wave),
        "executor_idle_frac": 0.6 - 0.1 * abs(wave),
        "staleness_mean": 0.8 + 0.2 * wave,
        "staleness_max": 2.0,
        "temperature": 1.0 if step < 10 else 1.2,
        "diversity": 0.55 + 0.05 * wave,
        "wait_s": 0.3 + 0.1 * abs(wave),
        "compute_s": 1.5,
        "sync_s": 0.2 + 0.02 * wave,
        "step_s": 2.0 + 0.1 * abs(wave),
        "generators": generators,
        "executors": executors,
        "buffer": {
            "issued": consumed + in_flight + 3,
            "consumed": consumed,
            "dropped_stale": 2,
            "failed": 1,
            "failed_by_reason": {"lease_expired": 1},
            "entered": {},
            "left": {},
            "staleness_hist": hist,
            "errors": {},
            "response_tokens_in": 1000 * step,
            "bytes_in": 50_000 * step,
            "bytes_out": 20_000 * step,
            "requests": 100 * step,
            "version": step,
            "max_staleness": 2,
            "batch_size": 8,
            "high_water_groups": 40,
            "in_flight": in_flight,
            "depths": depths,
            "admission_capacity": 32,
            "prompts_done": False,
            "finished": False,
            "prompt_cursor": {"epoch": 0, "index": 8 * step},
            "rates": {"issued": 4.0, "consumed": 4.0},
            "invariant_ok": True,
            "invariant_violations": [],
        },
        "memory": synthetic_memory(step, generators, executors),
    }


def synthetic_memory(step: int, generators: int = 2, executors: int = 2) -> dict[str, Any]:
    """The `memory` field of a step record (issue 49; launch/monitor/memory_view.py): every
    generator with its engine's KV cache, executors, a CUDA learner rank 0 and the buffer."""
    gib = 2**30
    gens = {
        f"generator-{i}": {
            "rss_bytes": (3 + 0.1 * step) * gib,
            "processes": 2,
            "kv_cache_usage": 0.05 * (step % 10),
            "kv_cache_peak": 0.5,
        }
        for i in range(generators)
    }
    execs = {f"executor-{i}": {"rss_bytes": 0.5 * gib, "processes": 5} for i in range(executors)}
    learner = {
        "rss_bytes": 6 * gib,
        "peak_rss_bytes": 6.5 * gib,
        "device_allocated_bytes": (20 + step % 3) * gib,
        "device_reserved_bytes": 30 * gib,
        "device_peak_bytes": 40 * gib,
        "device_total_bytes": 80 * gib,
    }
    return {
        "generator": gens,
        "executor": execs,
        "learner": {"learner-0": learner},
        "buffer": {"buffer": {"rss_bytes": 0.3 * gib + step * 2**20}},
    }


def synthetic_mismatch(step: int) -> dict[str, Any]:
    """The mismatch fields of a step record (learner/algorithm/mismatch.py: mismatch_metrics), with the
    staleness buckets "0" and "1" at every step and "8+" from step 5 on."""

    def bucket(b: int) -> dict[str, float]:
        d = 0.01 * (1 + b) * (1 + 0.1 * math.sin(step))
        return {
            "tokens": 1000.0 / (1 + b),
            "abs_dlogp": d,
            "kl": d * d / 2,
            "out_of_band_frac": d / 10,
            "ratio_p1": math.exp(-3 * d),
            "ratio_p50": 1.0,
            "ratio_p99": math.exp(3 * d),
        }

    by = {"0": bucket(0), "1": bucket(1)} | ({"8+": bucket(8)} if step >= 5 else {})
    overall = {f"mismatch_{k}": v for k, v in bucket(0).items() if k != "tokens"}
    return overall | {"mismatch_by_staleness": by}


def synthetic_verdicts(step: int) -> dict[str, Any]:
    """The verdict fields of a step record (issue 34): 16 responses, `WA` from step 1, `TLE`
    from step 3, and a 6-bin group pass-rate histogram over 8 groups."""
    ac = min(12, 4 + step)
    counts = {"AC": ac, "WA": 16 - ac - (1 if step >= 3 else 0)} | ({"TLE": 1} if step >= 3 else {})
    return {
        "verdict_counts": counts,
        "verdict_rates": {k: v / 16 for k, v in counts.items()},
        "extraction_failed": step % 3,
        "response_len_p50": 30.0 + step,
        "response_len_p90": 60.0 + 2 * step,
        "response_len_max": 128.0,
        "group_pass_hist": [step % 2, 1, 2, 2, 1, 2 - step % 2],
    }


def synthetic_rewards(step: int) -> dict[str, Any]:
    """The reward function's fields of a step record (issue 34): components `formatted` (every
    step) and `length` (from step 4), and the executors' cumulative reward errors."""
    components = {"formatted": 0.1 * (step % 10)} | ({"length": 0.5} if step >= 4 else {})
    return {"reward_components": components, "reward_errors": step // 5}


def synthetic_sources(step: int) -> dict[str, Any]:
    """The per-data-source fields of a step record (issue 45): sources `A` (share 0.75 on even
    steps, 0.8 on odd) and `B-v0.3` (a dotted name, as a file stem gives; from step 3)."""
    share = 0.75 if step % 2 == 0 else 0.8
    data = {
        "A": {"share": 1.0 if step < 3 else share, "groups": 8, "reward": 0.5, "pass_rate": 0.4}
    }
    if step >= 3:
        data["B-v0.3"] = {"share": 1 - share, "groups": 2, "reward": 0.25, "pass_rate": 0.1}
    return {"data": data}


def synthetic_eval(step: int) -> dict[str, Any]:
    """Fields of an "eval" record (held-out pass rates) at `step`."""
    return {
        "step": step,
        "heldout_pass_rate": 0.2 + 0.01 * step,
        "heldout_greedy_pass_rate": 0.25 + 0.01 * step,
    }


def feed(logger, first: int, last: int, eval_every: int = 5) -> None:
    """Log steps first..last (and an eval every `eval_every` steps) into a MetricsLogger."""
    for step in range(first, last + 1):
        logger.log("step", **synthetic_step(step))
        if eval_every and step % eval_every == 0:
            logger.log("eval", **synthetic_eval(step))


CALIBRATION = {
    "event": "calibration",
    "step": 0,
    "table": [[0.6, 0.15], [1.0, 0.34], [1.4, 0.8]],
    "chosen": 1.0,
    "target": 0.3,
    "reached_target": True,
    "calibration_s": 4.2,
}
"""The fields of a temperature calibration "event" record (without kind/time), chosen T 1.0."""


def step_up(step: int) -> dict[str, Any]:
    """The fields of the monitor's "temperature" event at `step`: T 1 -> 1.4, diversity too low."""
    return {
        "event": "temperature",
        "cause": "monitor",
        "step": step,
        "before": 1.0,
        "temperature": 1.4,
        "message": f"step {step}: diversity 0.200 below target 0.300 for 5 steps: "
        "temperature 1 -> 1.4",
    }

"""The per-step metrics `microcoder compare` records, registered once (METRICS), and how each is
read from a run's metrics.jsonl (`run_series`).

Most are fields of the `step` records the training loop logs (launch/run/training_loop.py: the
learner's metrics and the intake's); the held-out pass rate is a field of the `eval` records
(launch/run/heldout_eval.py, every `eval.every` steps and at the end).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    """One curve of the comparison."""

    key: str
    """Its name in compare.json and the plot's file name (plots/<key>.png)."""
    title: str
    """The plot's title and the table's column head."""
    label: str
    """The y-axis label (with the unit)."""
    kind: str
    """Which records hold it: "step" or "eval"."""
    field: str
    """The record field."""
    digits: int = 3
    """Decimals in the tables."""


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric(
            "heldout_pass_rate", "held-out pass@1", "pass@1 (sampled)", "eval", "heldout_pass_rate"
        ),
        Metric("reward_mean", "batch reward", "mean reward", "step", "reward_mean"),
        Metric(
            "response_len_mean", "response length", "tokens", "step", "response_len_mean", digits=1
        ),
        Metric("truncated_frac", "truncation rate", "fraction truncated", "step", "truncated_frac"),
        Metric("diversity", "diversity", "n-gram diversity", "step", "diversity"),
        Metric("entropy", "entropy", "nats / token", "step", "entropy"),
        Metric("clip_frac", "clip fraction", "fraction of tokens clipped", "step", "clip_frac"),
        Metric(
            "masked_frac", "masked fraction", "fraction of responses masked", "step", "masked_frac"
        ),
        Metric(
            "looping_frac",
            "looping fraction",
            "fraction of responses looping",
            "step",
            "looping_frac",
        ),
        Metric("temperature", "sampling temperature", "T", "step", "temperature", digits=2),
        Metric(
            "mismatch_kl",
            "mismatch KL (k3)",
            "k3 KL, learner vs generator",
            "step",
            "mismatch_kl",
            digits=5,
        ),
        Metric(
            "mismatch_abs_dlogp",
            "mismatch abs(Δ log p)",
            "mean abs(Δ log p) per token",
            "step",
            "mismatch_abs_dlogp",
            digits=4,
        ),
        Metric(
            "off_policy_dropped_frac",
            "off-policy dropped fraction",
            "fraction of tokens the correction dropped",
            "step",
            "off_policy_dropped_frac",
            digits=4,
        ),
    )
}
"""The recorded metrics, in the order of the table and the figure."""

Series = list[tuple[int, float]]
"""(step, value) points in step order."""


def run_series(records: list[dict[str, Any]]) -> dict[str, Series]:
    """Every METRICS curve of one run from its metrics.jsonl records (missing values left out).

    A resumed run logs the steps after its checkpoint again: the last record of a step wins.
    """
    out: dict[str, dict[int, float]] = {key: {} for key in METRICS}
    for rec in records:
        if rec.get("kind") not in ("step", "eval") or "step" not in rec:
            continue
        for m in METRICS.values():
            value = rec.get(m.field) if m.kind == rec["kind"] else None
            if isinstance(value, (int, float)) and math.isfinite(value):
                out[m.key][int(rec["step"])] = float(value)
    return {key: sorted(points.items()) for key, points in out.items()}


STALENESS_FIELDS = ("kl", "abs_dlogp", "out_of_band_frac", "tokens")
"""The per-staleness mismatch values (learner/algorithm/mismatch.py) `staleness_series` reads."""


def staleness_series(records: list[dict[str, Any]]) -> dict[str, dict[str, Series]]:
    """The mismatch by staleness of one run: {bucket ("0", "1", ..., "8+"): {field: series}}
    from the step records' `mismatch_by_staleness` (learner/algorithm/mismatch.py); the last record of a
    step wins, as in `run_series`."""
    out: dict[str, dict[str, dict[int, float]]] = {}
    for rec in records:
        if rec.get("kind") != "step" or "step" not in rec:
            continue
        by = rec.get("mismatch_by_staleness")
        for bucket, values in (by if isinstance(by, dict) else {}).items():
            for name in STALENESS_FIELDS:
                value = values.get(name) if isinstance(values, dict) else None
                if isinstance(value, (int, float)) and math.isfinite(value):
                    slot = out.setdefault(str(bucket), {}).setdefault(name, {})
                    slot[int(rec["step"])] = float(value)
    order = sorted(out, key=lambda b: int(b.rstrip("+")))
    return {b: {n: sorted(out[b][n].items()) for n in out[b]} for b in order}


def stop_message(records: list[dict[str, Any]]) -> str:
    """The run's own word on why it stopped before max_steps (its last event="stopped" record,
    launch/run/command.py: say_stopped); "" when it has none."""
    said = [
        str(r.get("message", ""))
        for r in records
        if r.get("kind") == "event" and r.get("event") == "stopped"
    ]
    return said[-1] if said else ""


def final_values(series: dict[str, Series]) -> dict[str, float | None]:
    """The last point of each curve (None for an empty one)."""
    return {key: (points[-1][1] if points else None) for key, points in series.items()}


@dataclass(frozen=True)
class Band:
    """One arm's curve over its seeds: per step, the mean and the min-max band."""

    steps: list[int]
    mean: list[float]
    low: list[float]
    high: list[float]
    seeds: list[int]
    """How many seeds have a point at each step."""


def seed_band(curves: list[Series]) -> Band:
    """Mean, min and max over the seeds at each step any seed has (seeds without it left out)."""
    by_step: dict[int, list[float]] = {}
    for curve in curves:
        for step, value in curve:
            by_step.setdefault(step, []).append(value)
    steps = sorted(by_step)
    vals = [by_step[s] for s in steps]
    return Band(
        steps=steps,
        mean=[sum(v) / len(v) for v in vals],
        low=[min(v) for v in vals],
        high=[max(v) for v in vals],
        seeds=[len(v) for v in vals],
    )


@dataclass(frozen=True)
class Spread:
    """A final value over seeds: mean ± sample standard deviation, and the range."""

    mean: float
    std: float
    """Sample standard deviation (n − 1); 0 for one seed."""
    low: float
    high: float
    n: int

    def format(self, digits: int = 3) -> str:
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"


def spread(values: list[float | None]) -> Spread | None:
    """The Spread of the seeds' values that exist (None when none does)."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0
    return Spread(mean, math.sqrt(var), min(xs), max(xs), len(xs))

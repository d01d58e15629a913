"""Does a held-out eval beside training slow the learner? Step wall times from a run's
metrics.jsonl, split into steps that overlap an eval and steps that do not.

    python -m microcoder.bench.eval_overlap RUN_DIR/metrics.jsonl

A step's interval is [time - step_s, time] of its "step" record; an eval's is [started, time] of
its "eval" record (launch/run/heldout_eval.py). The first step is left out (it includes the engines'
warm-up and, beside training, overlaps the start eval by construction, which would flatter
nothing but skew both sides). Prints one JSON object: counts, medians, means and
`ratio_median` = median(step_s during an eval) / median(step_s without one), and the training
samples' staleness (the step records' `staleness_mean` / `staleness_max`, averaged) during an
eval and without one, and the generators the evals sampled on (eval.generators sets some aside).
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any


def split_steps(
    records: list[dict[str, Any]], field: str = "step_s"
) -> tuple[list[float], list[float]]:
    """(`field` of steps overlapping an eval, of the others), first step left out (a step
    without the field is skipped)."""
    evals = [
        (r["started"], r["time"]) for r in records if r.get("kind") == "eval" and "started" in r
    ]
    steps = sorted((r for r in records if r.get("kind") == "step"), key=lambda r: r["step"])[1:]
    during = []
    without = []
    for r in steps:
        t1 = r["time"]
        t0 = t1 - r["step_s"]
        overlaps = any(e0 < t1 and t0 < e1 for e0, e1 in evals)
        if r.get(field) is not None:
            (during if overlaps else without).append(float(r[field]))
    return during, without


def overlap_report(records: list[dict[str, Any]]) -> dict[str, Any]:
    during, without = split_steps(records)
    out: dict[str, Any] = {"steps_during_eval": len(during), "steps_without_eval": len(without)}
    for name, xs in (("during", during), ("without", without)):
        out[f"median_{name}_s"] = statistics.median(xs) if xs else None
        out[f"mean_{name}_s"] = statistics.fmean(xs) if xs else None
    if during and without:
        out["ratio_median"] = out["median_during_s"] / out["median_without_s"]
        out["ratio_mean"] = out["mean_during_s"] / out["mean_without_s"]
    for field in ("staleness_mean", "staleness_max"):  # the training samples' age
        late, fresh = split_steps(records, field)
        out[f"{field}_during"] = statistics.fmean(late) if late else None
        out[f"{field}_without"] = statistics.fmean(fresh) if fresh else None
    evals = [r for r in records if r.get("kind") == "eval"]
    out["eval_generators"] = sorted({g for r in evals for g in r.get("eval_generators", [])})
    out["evals"] = [
        [r["step"], r.get("policy_version"), round(r["time"] - r.get("started", r["time"]), 2)]
        for r in evals
    ]
    return out


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python -m microcoder.bench.eval_overlap RUN_DIR/metrics.jsonl")
    with open(argv[0]) as f:
        records = [json.loads(line) for line in f if line.strip()]
    print(json.dumps(overlap_report(records), indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])

"""Held-out pass rates of the real half of `microcoder bench pipeline`: does async cost learning?

Both launches evaluate the held-out split at the same steps (the start, every `eval.every`
steps, the end; `eval` records of metrics.jsonl with `heldout_pass_rate`, sampled at
T = eval.temperature, and `heldout_greedy_pass_rate`). Pure functions of the records.
"""

from __future__ import annotations

from typing import Any

RATES = (("heldout", "heldout_pass_rate"), ("heldout_greedy", "heldout_greedy_pass_rate"))
"""(prefix of the summary fields, field of the eval record)."""


def eval_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's held-out evaluations in step order."""
    evals = [r for r in records if r.get("kind") == "eval" and "heldout_pass_rate" in r]
    return sorted(evals, key=lambda r: (r["step"], r["time"]))


def eval_seconds(record: dict[str, Any]) -> float:
    """How long one evaluation took (its sampled and greedy parts, each pipelined)."""
    return sum(
        float(v) for k, v in record.items() if k.startswith("heldout") and k.endswith("_wall_s")
    )


def heldout_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """First and last evaluation of a run: `heldout_start`, `heldout_end`, their greedy twins,
    the steps they were taken at and every (step, sampled, greedy) triple; None values when the
    run has no evaluation."""
    evals = eval_records(records)
    first, last = (evals[0], evals[-1]) if evals else ({}, {})
    out: dict[str, Any] = {
        "heldout_start_step": first.get("step"),
        "heldout_end_step": last.get("step"),
        "heldout_evals": [
            [r["step"], r["heldout_pass_rate"], r.get("heldout_greedy_pass_rate")] for r in evals
        ],
    }
    for prefix, key in RATES:
        out[f"{prefix}_start"] = first.get(key)
        out[f"{prefix}_end"] = last.get(key)
    return out


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def heldout_headline(sync: dict[str, Any], async_: dict[str, Any]) -> dict[str, Any]:
    """Top-level held-out fields: `sync_heldout_start`, ..., `async_heldout_greedy_end`, each
    run's gain (end - start) and the async - sync differences at the end and in gain.
    `heldout_same_steps` says whether both runs were evaluated at the same first and last step
    (the comparison is only fair then)."""
    out: dict[str, Any] = {}
    for prefix, _ in RATES:
        for name, run in (("sync", sync), ("async", async_)):
            for end in ("start", "end"):
                out[f"{name}_{prefix}_{end}"] = run.get(f"{prefix}_{end}")
            out[f"{name}_{prefix}_gain"] = _diff(
                run.get(f"{prefix}_end"), run.get(f"{prefix}_start")
            )
        out[f"{prefix}_end_diff"] = _diff(out[f"async_{prefix}_end"], out[f"sync_{prefix}_end"])
        out[f"{prefix}_gain_diff"] = _diff(out[f"async_{prefix}_gain"], out[f"sync_{prefix}_gain"])
    steps = [(r.get("heldout_start_step"), r.get("heldout_end_step")) for r in (sync, async_)]
    out["heldout_steps"] = list(steps[0])
    out["heldout_same_steps"] = steps[0] == steps[1] and None not in steps[0]
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def heldout_table(result: dict[str, Any]) -> list[str]:
    """Start / end / gain of both pass rates for both runs, and async - sync."""
    if result.get("sync_heldout_start") is None and result.get("async_heldout_start") is None:
        return ["held-out: no eval records (set eval.every > 0)"]
    start, end = result.get("heldout_steps", [None, None])
    same = "" if result.get("heldout_same_steps") else "  (NOT at the same steps in both runs)"
    out = [
        f"Held-out pass rate (eval at step {start} and step {end}){same}",
        f"{'':32}{'start':>9}{'end':>9}{'gain':>9}",
    ]
    for prefix, label in (("heldout", "sampled"), ("heldout_greedy", "greedy")):
        for name, k in (("sync", "k=0"), ("async", f"k={result.get('async_staleness', '?')}")):
            cells = [result.get(f"{name}_{prefix}_{e}") for e in ("start", "end")]
            gain = result.get(f"{name}_{prefix}_gain")
            out.append(
                f"{f'{label} {name} ({k})':32}{_pct(cells[0]):>9}{_pct(cells[1]):>9}"
                f"{_signed(gain):>9}"
            )
        out.append(
            f"{f'{label} async - sync':32}{'':>9}{_signed(result.get(f'{prefix}_end_diff')):>9}"
            f"{_signed(result.get(f'{prefix}_gain_diff')):>9}"
        )
    return out

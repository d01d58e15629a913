"""The table a run prints at its end (also written to run_dir/summary.txt)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TrainSummary:
    """What the training loop returns (launch/run/training_loop.py: `train`), for this table and
    the launch's exit (launch/run/command.py: `finish`)."""

    steps: int
    """The policy version the loop ended at."""
    wall_s: float
    wait_s: float = 0.0
    compute_s: float = 0.0
    sync_s: float = 0.0
    """The learner's seconds summed over the run's steps: waiting for data, training, syncing."""
    last_checkpoint: Path | None = None
    """The last checkpoint the loop wrote (None: none on its schedule)."""
    stopped: str = ""
    """Why the loop stopped before max_steps (the all-filtered patience, non-finite updates);
    "" when it did not."""


def _fifths(values: list[float]) -> list[float]:
    """Means of the values split into (up to) five consecutive chunks."""
    if not values:
        return []
    n = min(5, len(values))
    size = len(values) / n
    chunks = [values[round(i * size) : round((i + 1) * size)] for i in range(n)]
    return [sum(c) / len(c) for c in chunks if c]


def summary_table(
    history: list[dict[str, Any]], summary: TrainSummary, pools: dict[str, list]
) -> str:
    steps = [r for r in history if r["kind"] == "step"]
    evals = [r for r in history if r["kind"] == "eval"]
    rewards = [float(r.get("reward_mean") or 0.0) for r in steps]
    lines = [
        "",
        "=== run summary ===",
        f"steps: {summary.steps}   wall: {summary.wall_s:.1f} s",
    ]
    if evals:
        a = evals[0]
        b = evals[-1]
        lines += [
            f"{'held-out pass rate':<28}{'start (step ' + str(a['step']) + ')':>18}{'end (step ' + str(b['step']) + ')':>18}",
            f"{'  sampled pass@1':<28}{a['heldout_pass_rate']:>18.3f}{b['heldout_pass_rate']:>18.3f}",
            f"{'  greedy':<28}{a['heldout_greedy_pass_rate']:>18.3f}{b['heldout_greedy_pass_rate']:>18.3f}",
        ]
        lines += _by_group(a, b)
    if rewards:
        k = min(5, len(rewards))
        curve = " -> ".join(f"{v:.2f}" for v in _fifths(rewards))
        lines += [
            f"batch reward: first {k} steps {sum(rewards[:k]) / k:.3f}, last {k} steps "
            f"{sum(rewards[-k:]) / k:.3f}, max {max(rewards):.3f}",
            f"reward curve (mean per fifth of the run): {curve}",
        ]
        lines += temperature_lines(steps, history)
    gen_busy = sum(g.get("busy_s", 0.0) for g in pools.get("generators", []))
    judge_busy = sum(e.get("busy_s", 0.0) for e in pools.get("executors", []))
    lines += [
        "wall time split (seconds; pools overlap, so the parts add up to more than the wall time):",
        f"  generate {gen_busy:8.1f}   judge {judge_busy:8.1f}   train {summary.compute_s:8.1f}"
        f"   sync {summary.sync_s:8.1f}   learner wait-for-data {summary.wait_s:8.1f}",
    ]
    return "\n".join(lines)


def _by_group(first: dict, last: dict) -> list[str]:
    """Held-out pass@1 per platform x difficulty cell at start and end (when there are cells)."""
    start = {(r["platform"], r["difficulty"]): r for r in first.get("heldout_by_group") or []}
    rows = [
        r
        for r in last.get("heldout_by_group") or []
        if "all" not in (r["platform"], r["difficulty"])
    ]
    if len(rows) < 2:
        return []
    out = [f"{'  by platform / difficulty':<28}{'start':>18}{'end':>18}{'problems':>10}"]
    for r in rows:
        a = start.get((r["platform"], r["difficulty"]), {}).get("pass_at_k", {}).get("1")
        b = r["pass_at_k"].get("1")
        name = f"    {r['platform']} / {r['difficulty']}"
        a_text = f"{a:.3f}" if a is not None else "-"
        out.append(f"{name:<28}{a_text:>18}{b:>18.3f}{r['problems']:>10}")
    return out


def temperature_spans(steps: list[dict[str, Any]]) -> list[tuple[float | None, list[dict]]]:
    """The step records cut where the sampling temperature changes: (T, its steps) in order."""
    spans: list[tuple[float | None, list[dict]]] = []
    for r in steps:
        t = r.get("temperature")
        if spans and spans[-1][0] == t:
            spans[-1][1].append(r)
        else:
            spans.append((t, [r]))
    return spans


def temperature_lines(steps: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[str]:
    """When T changed and why, and the batch reward compared at equal T.

    A higher T samples more diverse responses, often of lower reward, so a first-vs-last reward
    across a change mixes two temperatures: a run whose monitor raised T can read as a failure
    while its held-out pass rate (sampled at eval.temperature) rose."""
    spans = temperature_spans(steps)
    if len(spans) < 2:
        t = spans[0][0] if spans else None
        return [] if t is None else [f"temperature: {t:g} throughout"]
    causes = {
        int(r["step"]): r.get("cause", "")
        for r in history
        if r.get("kind") == "event" and r.get("event") == "temperature" and "step" in r
    }
    changes = []
    for t, span in spans[1:]:
        done = int(span[0]["step"]) - 1  # learner steps done when it changed
        why = f" ({causes[done]})" if causes.get(done) else ""
        changes.append(f"{t:g} from step {span[0]['step']}{why}")
    lines = [
        f"temperature: {_fmt_t(spans[0][0])} at step {spans[0][1][0]['step']}, then "
        + ", ".join(changes),
        "batch reward at equal T (rewards sampled at different T do not compare: read each row;"
        " the held-out pass rate is sampled at eval.temperature throughout):",
    ]
    for t, span in spans:
        rewards = [float(r.get("reward_mean") or 0.0) for r in span]
        k = min(5, len(rewards))
        first = span[0]["step"]
        last = span[-1]["step"]
        where = f"step {first}" if first == last else f"steps {first}-{last}"
        lines.append(
            f"  T={_fmt_t(t):<6}{where:<16}first {k} {sum(rewards[:k]) / k:.3f}, "
            f"last {k} {sum(rewards[-k:]) / k:.3f}"
        )
    return lines


def _fmt_t(t: float | None) -> str:
    return "?" if t is None else f"{t:g}"

"""The two tables of `microcoder bench pipeline` (pure functions of its result dict)."""

from __future__ import annotations

from typing import Any

REAL_ROWS = [
    ("s_per_step", "wall s per step", "{:.2f}"),
    ("samples_per_s", "samples/s (responses trained)", "{:.1f}"),
    ("learner_idle_frac", "learner idle (wait / step)", "{:.0%}"),
    ("generator_idle_frac", "generator idle", "{:.0%}"),
    ("executor_idle_frac", "executor idle", "{:.0%}"),
    ("compute_s_mean", "learner compute s per step", "{:.2f}"),
    ("staleness_mean", "staleness mean", "{:.2f}"),
    ("staleness_max", "staleness max", "{:.0f}"),
    ("reward_first5", "reward mean, first 5 steps", "{:.3f}"),
    ("reward_last5", "reward mean, last 5 steps", "{:.3f}"),
    ("launch_wall_s", "launch wall s (start to exit)", "{:.0f}"),
]


def _cell(fmt: str, value: Any) -> str:
    return "-" if value is None else fmt.format(value)


def real_table(result: dict[str, Any]) -> list[str]:
    """Side by side: the synchronous run and the asynchronous one, then the speedup."""
    real = result["real"]
    keys = sorted(real["runs"], key=int)
    runs = [real["runs"][k] for k in keys]
    heads = [("sync" if k == "0" else "async") + f" (k={k})" for k in keys]
    n = runs[0]["steps_measured"]
    out = [
        f"Real tiny workload: {real['config']}, {real['max_steps']} steps per launch, "
        f"first {real['warmup']} left out ({n} measured)",
        *_warmstart_line(real.get("warmstart")),
        f"{'':32}" + "".join(f"{h:>14}" for h in heads),
    ]
    for key, label, fmt in REAL_ROWS:
        if all(r.get(key) is None for r in runs):
            continue
        out.append(f"{label:32}" + "".join(f"{_cell(fmt, r.get(key)):>14}" for r in runs))
    out.append(
        f"speedup async/sync (samples/s): {result['speedup']:.2f}x   "
        f"({result['async_samples_per_s']:.1f} vs {result['sync_samples_per_s']:.1f} samples/s)"
    )
    if "speedup_at_equal_compute" in result:
        out.append(
            f"speedup at equal learner compute (s per step / compute s per step): "
            f"{result['speedup_at_equal_compute']:.2f}x"
        )
    out += [f"  {h}: {r['command']}" for h, r in zip(heads, runs, strict=True)]
    return out


def _warmstart_line(ws: dict[str, Any] | None) -> list[str]:
    if not ws or not ws.get("warmstart"):
        return []
    if ws.get("cached"):
        return [f"warm-started model {ws['model']}: cached (reused by both launches)"]
    took = ws.get("built_by_first_launch_s")
    took = f" in {took:.0f} s" if took is not None else ""
    return [
        f"warm-started model {ws['model']}: NOT cached, built by the first launch{took} "
        "(before its first step: not in the per-step figures, in its launch wall s)"
    ]


def sim_table(sim: dict[str, Any]) -> list[str]:
    """One line per generator count: stage seconds, bound, achieved, ratio, where time went."""
    c = sim["costs"]
    out = [
        f"Simulated stage costs per batch and replica: generate {c['gen_s']:.2f} s, judge "
        f"{c['judge_s']:.2f} s, train {c['train_s']:.2f} s; {sim['executors']} executor(s), "
        f"max_staleness {sim.get('max_staleness', '?')}, {sim.get('steps', '?')} steps measured "
        "per point",
        f"{'gens':>4} {'gen s':>6} {'judge s':>7} {'train s':>7} {'bottleneck':>10} "
        f"{'ideal/s':>8} {'achieved/s':>10} {'ratio':>6} {'learner idle':>12} "
        f"{'gen busy':>8} {'gen CPU':>7} {'CPU ms/group':>12} {'stale':>5} {'dropped':>7}",
    ]
    for p in sim["points"]:
        t = p["stage_s"]
        cpu = p.get("cpu", {})
        out.append(
            f"{p['generators']:>4} {t['generate']:>6.2f} {t['judge']:>7.2f} {t['train']:>7.2f} "
            f"{p['bottleneck']:>10} {p['ideal_steps_per_s']:>8.2f} "
            f"{p['achieved_steps_per_s']:>10.2f} {p['ratio']:>6.2f} "
            f"{p['learner_idle_frac']:>12.0%} {p['generator_busy_frac']:>8.0%} "
            f"{cpu.get('generator_cpu_frac_mean', 0.0):>7.0%} "
            f"{cpu.get('generator_cpu_s_per_group', 0.0) * 1e3:>12.1f} "
            f"{p['staleness_mean']:>5.2f} {p['dropped_stale']:>7}"
        )
    out.append(
        "gen CPU: the mean generator's process CPU seconds / its loop's wall seconds; CPU "
        "ms/group: all generators' CPU per group handed in (--json: per generator, and the "
        "learner's, executors' and buffer host's CPU)"
    )
    for p in sim["points"]:
        gens = p.get("cpu", {}).get("generators", {})
        if gens:
            fracs = " ".join(f"{g['cpu_frac']:.0%}" for g in gens.values())
            out.append(f"  {p['generators']} generators, CPU / wall each: {fracs}")
    worst = min((p["ratio"] for p in sim["points"]), default=0.0)
    out.append(f"lowest achieved/ideal: {worst:.2f} (goal >= 0.90)")
    return out

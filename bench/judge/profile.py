"""`microcoder bench judge --profile` (dev-only): where a stdin program's milliseconds go.

Runs one workload through our pool with stage stamps on (sandbox/grade.py PROFILE): the host,
the fork server and the forked child stamp CLOCK_MONOTONIC (one clock across the sandbox's
namespaces) at each stage boundary of every run. Stages, in order, for one run (one test):

    ipc_in       host sends the request (or `next`) -> the fork server has read it
    load         (first run of a solution) fresh workdir, compile, rlimits, gc.freeze
    prep         stdio memfds truncated and the input written
    fork         os.fork() in the server (copies its page tables)
    child_setup  fork -> the child has entered: setsid, fds, uid, rlimits, stdio objects
                 (it contains `fork`, the parent's side of the same span)
    program      the program runs, then its shutdown (threads, atexit, flush)
    exit         the child's _exit (its address space torn down) -> the server notices
    reap         wait4 + sweep of whatever the program left
    reply        outputs read from the memfds, the `done` frame built
    ipc_out      the frame on the pipe -> the host thread has it
    compare      the host compares the output with the expected one
"""

from __future__ import annotations

import statistics
import time

from microcoder.bench.judge.paired import CpuMeter
from microcoder.sandbox import grade

STAGES = (
    ("ipc_in", "host_sent", "got"),
    ("load", "got", "loaded"),
    ("prep", "loaded|got", "fork"),
    ("fork", "fork", "forked"),
    ("child_setup", "fork", "entered"),
    ("program", "entered", "exiting"),
    ("exit", "exiting", "noticed"),
    ("reap", "noticed", "reaped"),
    ("reply", "reaped", "sent"),
    ("ipc_out", "sent", "host_got"),
    ("compare", "host_got", "compared"),
)


def _span(row: dict, start: str, end: str) -> float | None:
    first = next((row[k] for k in start.split("|") if row.get(k)), None)
    if first is None or not row.get(end):
        return None
    return (row[end] - first) * 1e3


def summarise_runs(rows: list[dict]) -> dict:
    """Mean and median ms per stage over runs (stages a run lacks are left out of its mean)."""
    complete = [r for r in rows if r.get("entered") and r.get("exiting")]
    stages = {}
    for name, start, end in STAGES:
        spans = [s for r in complete if (s := _span(r, start, end)) is not None]
        if spans:
            stages[name] = {
                "mean_ms": statistics.fmean(spans),
                "median_ms": statistics.median(spans),
                "runs": len(spans),
            }
    totals = [(r["compared"] - r["host_sent"]) * 1e3 for r in complete]
    return {
        "runs": len(rows),
        "runs_profiled": len(complete),
        "stages": stages,
        "run_total_mean_ms": statistics.fmean(totals) if totals else 0.0,
        "child_cpu_mean_ms": statistics.fmean(r["cpu"] for r in complete) * 1e3 if complete else 0,
        "child_minflt_mean": statistics.fmean(r["minflt"] for r in complete) if complete else 0,
    }


def profile(items: list, make_pool) -> dict:
    """Judge `items` once with stage stamps on; the runs' stages plus per-solution figures."""

    rows: list[dict] = []
    grade.PROFILE = rows
    try:
        meter = CpuMeter()
        pool = make_pool()
        t0 = time.perf_counter()
        for i, it in enumerate(items):
            pool.submit(it.problem, it.code, it.solution_id, tag=i)
        verdicts = list(pool.as_completed())
        wall = time.perf_counter() - t0
        pool.close()
        host, children = meter.read()
    finally:
        grade.PROFILE = None
    out = summarise_runs(rows)
    n = len(items)
    out.update(
        solutions=n,
        runs_per_solution=len(rows) / n,
        wall_s=wall,
        worker_ms_per_solution=wall * pool.size / n * 1e3,
        host_cpu_ms_per_solution=host / n * 1e3,
        sandbox_cpu_ms_per_solution=children / n * 1e3,
        accepted=sum(v.verdict == "AC" for v in verdicts),
    )
    return out


def format_profile(p: dict) -> str:
    lines = [
        f"profile of {p['solutions']} solutions, {p['runs']} runs ({p['runs_per_solution']:.2f} "
        f"per solution), wall {p['wall_s']:.2f} s = {p['worker_ms_per_solution']:.2f} worker-ms "
        f"per solution; CPU per solution host {p['host_cpu_ms_per_solution']:.2f} ms + sandboxes "
        f"{p['sandbox_cpu_ms_per_solution']:.2f} ms; a run's child: "
        f"{p['child_cpu_mean_ms']:.3f} ms CPU, {p['child_minflt_mean']:.0f} page faults",
        f"{'stage':<12} {'mean ms':>8} {'median ms':>10} {'share':>6}",
    ]
    total = p["run_total_mean_ms"] or 1.0
    for name, s in p["stages"].items():
        share = f"{s['mean_ms'] * s['runs'] / p['runs_profiled'] / total:.1%}"
        share = f"({share})" if name == "fork" else share  # inside child_setup
        lines.append(f"{name:<12} {s['mean_ms']:>8.3f} {s['median_ms']:>10.3f} {share:>8}")
    lines.append(f"{'run total':<12} {total:>8.3f}")
    return "\n".join(lines)

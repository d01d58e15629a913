"""`microcoder bench judge`: our judge vs LiveCodeBench's evaluator vs the in-process floor.

Side by side in one run, same machine, same solutions, same number of workers. Workloads:
overhead (short stdin programs, RL-reward-like), compute (LeetCodeDataset reference solutions,
~100 tests each), humaneval (canonical solutions), tricky (known truth). LiveCodeBench runs
from its own venv (created on first use, see bench/judge/lcb_run.py), never as our dependency.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from pathlib import Path

DESCRIPTION = "judge throughput and agreement: ours vs LiveCodeBench's evaluator vs the floor"
DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"  # beside the repo root


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="workers for all three")
    p.add_argument("--overhead-solutions", type=int, default=1000)
    p.add_argument("--compute-problems", type=int, default=228, help="LeetCodeDataset problems")
    p.add_argument("--workloads", default="overhead,compute,humaneval,tricky")
    p.add_argument("--timeout", type=int, default=6, help="per-test time limit (s), as LCB's")
    p.add_argument("--data", default=str(DATA), help="folder with leetcodedataset/, humaneval/")
    p.add_argument("--lcb-venv", default=".lcb-venv", help="LiveCodeBench's separate venv")
    p.add_argument("--skip-lcb", action="store_true", help="only ours and the floor")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each workload N times (ours, LCB, floor interleaved) and report the medians "
        "of times and ratios (a shared machine's load changes from minute to minute)",
    )


def _load(name: str, args):
    from microcoder.bench.judge import workloads as w

    if name == "overhead":
        return w.overhead_workload(args.overhead_solutions)
    if name == "compute":
        path = Path(args.data, "leetcodedataset", "LeetCodeDataset-v0.3.1-test.jsonl.gz")
        return w.compute_workload(str(path), args.compute_problems)
    if name == "humaneval":
        return w.humaneval_workload(str(Path(args.data, "humaneval", "HumanEval.jsonl.gz")))
    if name == "tricky":
        return w.tricky_workload()
    raise SystemExit(f"unknown workload {name!r}")


def _cpu() -> float:
    """CPU seconds of this process plus every descendant it has reaped so far."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _ours(make_pool, items) -> tuple[list, float, float]:
    """(verdicts, wall s without pool start-up, CPU s of judge + sandboxes + programs)."""
    c0 = _cpu()
    pool = make_pool()
    t0 = time.perf_counter()
    for i, it in enumerate(items):
        pool.submit(it.problem, it.code, it.solution_id, tag=i)
    verdicts = [None] * len(items)
    for v in pool.as_completed():
        verdicts[v.tag] = v
    wall = time.perf_counter() - t0
    pool.close()  # reaps the sandboxes, so their CPU time (and their programs') is counted
    return verdicts, wall, _cpu() - c0


def _timed(fn, *args):
    c0 = _cpu()
    out = fn(*args)
    return (*out, _cpu() - c0)


def _figures(n: int, ours_s, ours_cpu, lcb_s, lcb_cpu, floor_s, floor_cpu) -> dict:
    """One run's times and ratios (CPU per solution in ms: the figure least moved by load)."""
    row = {
        "ours_s": ours_s,
        "floor_s": floor_s,
        "ours_cpu_s": ours_cpu,
        "floor_cpu_s": floor_cpu,
        "ours_cpu_ms_per_solution": ours_cpu / n * 1e3,
        "ours_per_s": n / ours_s,
        "ours_vs_floor": ours_s / floor_s,
        "ours_vs_floor_cpu": ours_cpu / floor_cpu,
    }
    if lcb_s:
        row.update(
            lcb_s=lcb_s,
            lcb_cpu_s=lcb_cpu,
            lcb_cpu_ms_per_solution=lcb_cpu / n * 1e3,
            lcb_per_s=n / lcb_s,
            speedup_vs_lcb=lcb_s / ours_s,
            lcb_vs_floor=lcb_s / floor_s,
            speedup_vs_lcb_cpu=lcb_cpu / ours_cpu,
            lcb_vs_floor_cpu=lcb_cpu / floor_cpu,
        )
    return row


def _compare(items, ours, lcb, lcb_meta, floor) -> dict:
    acc = {"ours": sum(v.verdict == "AC" for v in ours), "floor": sum(floor)}
    if lcb is not None:
        acc["lcb"] = sum(lcb)
    known = [i for i, it in enumerate(items) if it.truth is not None]
    wrong = {"ours": sum((ours[i].verdict == "AC") != items[i].truth for i in known)}
    if lcb is not None:
        wrong["lcb"] = sum(lcb[i] != items[i].truth for i in known)
    disagree = []
    for i, it in enumerate(items):
        mine = ours[i].verdict == "AC"
        if mine != floor[i] or (lcb is not None and mine != lcb[i]):
            disagree.append(
                {
                    "solution": it.solution_id,
                    "ours": ours[i].verdict,
                    "ours_msg": ours[i].message[:160],
                    "floor": floor[i],
                    "lcb": None if lcb is None else lcb[i],
                    "lcb_msg": ""
                    if lcb is None
                    else str(lcb_meta[i].get("error_message", ""))[:160],
                    "truth": it.truth,
                }
            )
    return {
        "accepted": acc,
        "known_truth": len(known),
        "false_verdicts": wrong,
        "disagreements": len(disagree),
        "disagreement_list": disagree[:60],
    }


def run(args: argparse.Namespace) -> dict:
    from microcoder.bench.judge.floor import run_floor
    from microcoder.bench.judge.lcb_run import ensure_lcb_venv, run_lcb
    from microcoder.sandbox import JudgePool

    lcb_python = None if args.skip_lcb else ensure_lcb_venv(Path(args.lcb_venv).resolve())
    t0 = time.perf_counter()
    JudgePool(workers=args.workers).close()
    startup = time.perf_counter() - t0

    def make_pool():
        return JudgePool(workers=args.workers, time_limit_s=float(args.timeout), memory_mb=2048)

    result = {
        "workers": args.workers,
        "timeout_s": args.timeout,
        "pool_startup_s": startup,
        "workloads": {},
    }
    for name in args.workloads.split(","):
        items = _load(name, args)
        tests = sum(len(it.problem.tests) for it in items)
        runs = []
        for _ in range(max(1, args.repeat)):
            ours, ours_s, ours_cpu = _ours(make_pool, items)
            lcb = lcb_meta = lcb_s = lcb_cpu = None
            if lcb_python is not None:
                lcb, lcb_s, lcb_meta, lcb_cpu = _timed(
                    run_lcb, lcb_python, items, args.workers, args.timeout
                )
            floor, floor_s, floor_cpu = _timed(run_floor, items, args.workers)
            runs.append(_figures(len(items), ours_s, ours_cpu, lcb_s, lcb_cpu, floor_s, floor_cpu))
        row = {"solutions": len(items), "tests": tests, "load_avg": os.getloadavg()[0]}
        row.update({k: statistics.median(r[k] for r in runs) for k in runs[0]})
        if len(runs) > 1:
            row["runs"] = runs
        row.update(_compare(items, ours, lcb, lcb_meta, floor))
        result["workloads"][name] = row
    return result


def format_table(r: dict) -> str:
    def f(x, fmt):
        return "-" if x is None else format(x, fmt)

    lines = [
        f"workers={r['workers']}, per-test limit {r['timeout_s']} s, pool start-up "
        f"{r['pool_startup_s']:.2f} s (not in wall). cpu = CPU seconds of everything each judge ran.",
        f"{'workload':<10} {'sols':>5} {'tests':>6} | {'wall s ours/LCB/floor':>22} | "
        f"{'cpu s ours/LCB/floor':>22} | {'LCB/ours wall,cpu':>17} | {'ours/floor wall,cpu':>19} | "
        f"{'LCB/floor cpu':>13} | {'AC ours/LCB/floor':>17} | {'false o/L':>9} | disagree",
    ]
    for name, w in r["workloads"].items():
        acc, fv = w["accepted"], w["false_verdicts"]
        walls = f"{w['ours_s']:.2f}/{f(w.get('lcb_s'), '.2f')}/{w['floor_s']:.2f}"
        cpus = f"{w['ours_cpu_s']:.2f}/{f(w.get('lcb_cpu_s'), '.2f')}/{w['floor_cpu_s']:.2f}"
        vs_lcb = f"{f(w.get('speedup_vs_lcb'), '.2f')}x,{f(w.get('speedup_vs_lcb_cpu'), '.2f')}x"
        vs_floor = f"{w['ours_vs_floor']:.2f}x,{w['ours_vs_floor_cpu']:.2f}x"
        accs = f"{acc['ours']}/{acc.get('lcb', '-')}/{acc['floor']}"
        lines.append(
            f"{name:<10} {w['solutions']:>5} {w['tests']:>6} | {walls:>22} | {cpus:>22} | "
            f"{vs_lcb:>17} | {vs_floor:>19} | {f(w.get('lcb_vs_floor_cpu'), '.2f'):>12}x | "
            f"{accs:>17} | {fv['ours']:>4}/{fv.get('lcb', '-'):<4} | {w['disagreements']:>8}"
        )
    for name, w in r["workloads"].items():
        runs = w.get("runs", [])
        line = (
            f"  {name}: CPU per solution ours {w['ours_cpu_ms_per_solution']:.2f} ms, LCB "
            f"{f(w.get('lcb_cpu_ms_per_solution'), '.2f')} ms; load average {w['load_avg']:.1f}"
        )
        if runs:
            walls = ", ".join(f(x.get("speedup_vs_lcb"), ".2f") for x in runs)
            cpus = ", ".join(f(x.get("speedup_vs_lcb_cpu"), ".2f") for x in runs)
            line += f"; medians of {len(runs)} runs (LCB/ours wall: {walls}; cpu: {cpus})"
        lines.append(line)
    for name, w in r["workloads"].items():
        for d in w["disagreement_list"][:12]:
            lines.append(
                f"  {name}: {d['solution']}: ours {d['ours']} ({d['ours_msg'][:70]}) LCB {d['lcb']} "
                f"({d['lcb_msg'][:60]}) floor {d['floor']} truth {d['truth']}"
            )
    return "\n".join(lines)

"""`microcoder bench judge`: our judge vs LiveCodeBench's evaluator vs the in-process floor.

Side by side in one run, same machine, same solutions, same number of workers. Workloads:
overhead (short stdin programs, RL-reward-like), compute (LeetCodeDataset reference solutions,
~100 tests each), humaneval (canonical solutions), tricky (known truth). LiveCodeBench runs
from its own venv (created on first use, see judge_lcb_run.py), never as our dependency.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

DESCRIPTION = "judge throughput and agreement: ours vs LiveCodeBench's evaluator vs the floor"
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="workers for all three")
    p.add_argument("--overhead-solutions", type=int, default=1000)
    p.add_argument("--compute-problems", type=int, default=228, help="LeetCodeDataset problems")
    p.add_argument("--workloads", default="overhead,compute,humaneval,tricky")
    p.add_argument("--timeout", type=int, default=6, help="per-test time limit (s), as LCB's")
    p.add_argument("--data", default=str(DATA), help="folder with leetcodedataset/, humaneval/")
    p.add_argument("--lcb-venv", default=".lcb-venv", help="LiveCodeBench's separate venv")
    p.add_argument("--skip-lcb", action="store_true", help="only ours and the floor")


def _load(name: str, args):
    from microcoder.bench import judge_workloads as w

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


def _ours(pool, items) -> tuple[list, float]:
    t0 = time.perf_counter()
    for i, it in enumerate(items):
        pool.submit(it.problem, it.code, it.solution_id, tag=i)
    verdicts = [None] * len(items)
    for v in pool.as_completed():
        verdicts[v.tag] = v
    return verdicts, time.perf_counter() - t0


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
    from microcoder.bench.judge_floor import run_floor
    from microcoder.bench.judge_lcb_run import ensure_lcb_venv, run_lcb
    from microcoder.sandbox import JudgePool

    lcb_python = None if args.skip_lcb else ensure_lcb_venv(Path(args.lcb_venv).resolve())
    t0 = time.perf_counter()
    pool = JudgePool(workers=args.workers, time_limit_s=float(args.timeout), memory_mb=2048)
    startup = time.perf_counter() - t0
    result = {
        "workers": args.workers,
        "timeout_s": args.timeout,
        "pool_startup_s": startup,
        "workloads": {},
    }
    try:
        for name in args.workloads.split(","):
            items = _load(name, args)
            tests = sum(len(it.problem.tests) for it in items)
            ours, ours_s = _ours(pool, items)
            lcb = lcb_meta = None
            lcb_s = None
            if lcb_python is not None:
                lcb, lcb_s, lcb_meta = run_lcb(lcb_python, items, args.workers, args.timeout)
            floor, floor_s = run_floor(items, args.workers)
            row = {
                "solutions": len(items),
                "tests": tests,
                "ours_s": ours_s,
                "floor_s": floor_s,
                "lcb_s": lcb_s,
                "ours_per_s": len(items) / ours_s,
                "ours_vs_floor": ours_s / floor_s,
            }
            if lcb_s:
                row.update(
                    lcb_per_s=len(items) / lcb_s,
                    speedup_vs_lcb=lcb_s / ours_s,
                    lcb_vs_floor=lcb_s / floor_s,
                )
            row.update(_compare(items, ours, lcb, lcb_meta, floor))
            result["workloads"][name] = row
    finally:
        pool.close()
    return result


def format_table(r: dict) -> str:
    head = (
        f"{'workload':<10} {'sols':>5} {'tests':>6} {'ours s':>8} {'LCB s':>8} {'floor s':>8} "
        f"{'ours/s':>8} {'LCB/s':>7} {'vs LCB':>7} {'ours/fl':>7} {'LCB/fl':>7} "
        f"{'AC o/L/f':>12} {'false o/L':>9} {'disagree':>8}"
    )
    lines = [
        f"workers={r['workers']} per-test limit={r['timeout_s']} s, "
        f"pool start-up {r['pool_startup_s']:.2f} s (not in 'ours s')",
        head,
    ]
    for name, w in r["workloads"].items():
        acc, fv = w["accepted"], w["false_verdicts"]

        def f(x, fmt):  # noqa: E306
            return format(x, fmt) if x is not None else "-"

        lines.append(
            f"{name:<10} {w['solutions']:>5} {w['tests']:>6} {w['ours_s']:>8.2f} {f(w['lcb_s'], '8.2f')} "
            f"{w['floor_s']:>8.2f} {w['ours_per_s']:>8.1f} {f(w.get('lcb_per_s'), '7.1f')} "
            f"{f(w.get('speedup_vs_lcb'), '6.2f')}x {w['ours_vs_floor']:>6.2f}x "
            f"{f(w.get('lcb_vs_floor'), '6.2f')}x "
            f"{acc['ours']:>4}/{acc.get('lcb', '-')}/{acc['floor']:<4} "
            f"{fv['ours']:>4}/{fv.get('lcb', '-'):<4} {w['disagreements']:>8}"
        )
    for name, w in r["workloads"].items():
        for d in w["disagreement_list"][:12]:
            lines.append(
                f"  {name}: {d['solution']}: ours {d['ours']} ({d['ours_msg'][:70]}) "
                f"LCB {d['lcb']} ({d['lcb_msg'][:60]}) floor {d['floor']} truth {d['truth']}"
            )
    return "\n".join(lines)

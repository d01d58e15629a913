"""`microcoder bench judge`: our judge vs LiveCodeBench's evaluator vs the in-process floor.

Side by side in one run, same machine, same solutions, same number of workers. Workloads:
overhead (short stdin programs, RL-reward-like; in C++ with `--language cpp`), compute (LeetCodeDataset reference solutions,
~100 tests each), humaneval (canonical solutions), tricky (known truth). LiveCodeBench runs
from its own venv (created on first use, see bench/judge/lcb_run.py), never as our dependency.

`--rounds N` (default 5) runs N paired rounds (bench/judge/paired.py): ours, LCB and the floor
back to back on the same solutions, ours first in even rounds and last in odd ones. Each ratio
is reported as its median over the rounds with min-max and IQR, next to CPU ms per program
(getrusage deltas: this process + its reaped children) and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from microcoder.bench.judge.paired import CpuMeter, format_spread, load_average, order, summarise

DESCRIPTION = "judge throughput and agreement: ours vs LiveCodeBench's evaluator vs the floor"
DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"  # beside the repo root


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="workers for all three")
    p.add_argument("--overhead-solutions", type=int, default=1000)
    p.add_argument(
        "--overhead-tests",
        type=int,
        default=3,
        help="tests per problem of the Python overhead workload (3 = the recorded workload; "
        "issue 48's hidden one has 5)",
    )
    p.add_argument("--compute-problems", type=int, default=228, help="LeetCodeDataset problems")
    p.add_argument("--workloads", default="overhead,compute,humaneval,tricky")
    p.add_argument("--timeout", type=int, default=6, help="per-test time limit (s), as LCB's")
    p.add_argument("--data", default=str(DATA), help="folder with leetcodedataset/, humaneval/")
    p.add_argument("--lcb-venv", default=".lcb-venv", help="LiveCodeBench's separate venv")
    p.add_argument("--skip-lcb", action="store_true", help="only ours and the floor")
    p.add_argument(
        "--language",
        choices=("python", "cpp"),
        default="python",
        help="cpp: the overhead workload in C++ (compiled once per program), ours against the "
        "no-isolation floor only (LiveCodeBench judges Python); --overhead-solutions sets its size",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="paired rounds: each runs ours, LCB and the floor back to back (ours first in even "
        "rounds, last in odd ones); reports per workload the median of each ratio over the "
        "rounds with its spread (min-max and IQR), and CPU ms per program",
    )
    p.add_argument(
        "--no-pin",
        action="store_true",
        help="ours with executor.pin_cpus = false (its workers float over the CPUs; the A/B of "
        "sandbox/claims.py)",
    )
    p.add_argument(
        "--repeat", type=int, default=None, help="the old name of --rounds (overrides it)"
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="dev-only: instead of the comparison, judge the first workload once with stage "
        "stamps and print where a stdin program's milliseconds go (bench/judge/profile.py)",
    )


def _load(name: str, args):
    from microcoder.bench.judge import workloads as w

    if name == "overhead" and getattr(args, "language", "python") == "cpp":
        return w.cpp_overhead_workload(args.overhead_solutions)
    if name == "overhead":
        return w.overhead_workload(args.overhead_solutions, n_tests=args.overhead_tests)
    if name == "compute":
        path = Path(args.data, "leetcodedataset", "LeetCodeDataset-v0.3.1-test.jsonl.gz")
        return w.compute_workload(str(path), args.compute_problems)
    if name == "humaneval":
        return w.humaneval_workload(str(Path(args.data, "humaneval", "HumanEval.jsonl.gz")))
    if name == "tricky":
        return w.tricky_workload()
    raise SystemExit(f"unknown workload {name!r}")


def _ours(make_pool, items) -> tuple[list, float, float, float]:
    """(verdicts, wall s without pool start-up, host CPU s, sandbox CPU s). The CPU figures
    include the pool's start-up (its bwrap, fork servers and their warm-up)."""
    meter = CpuMeter()
    pool = make_pool()
    t0 = time.perf_counter()
    for i, it in enumerate(items):
        pool.submit(it.problem, it.code, it.solution_id, tag=i)
    verdicts = [None] * len(items)
    for v in pool.as_completed():
        verdicts[v.tag] = v
    wall = time.perf_counter() - t0
    pool.close()  # reaps the sandboxes, so their CPU time (and their programs') is counted
    return verdicts, wall, *meter.read()


def _timed(fn, *args):
    meter = CpuMeter()
    out = fn(*args)
    return (*out, sum(meter.read()))


def _figures(n: int, side: dict) -> dict:
    """One round's times and ratios. CPU per solution in ms: the figure least moved by load."""
    ours_s = side["ours"]["wall"]
    ours_cpu = side["ours"]["cpu"]
    floor_s = side["floor"]["wall"]
    floor_cpu = side["floor"]["cpu"]
    row = {
        "ours_s": ours_s,
        "floor_s": floor_s,
        "ours_cpu_s": ours_cpu,
        "floor_cpu_s": floor_cpu,
        "ours_cpu_ms_per_solution": ours_cpu / n * 1e3,
        "ours_host_cpu_ms_per_solution": side["ours"]["host"] / n * 1e3,
        "ours_sandbox_cpu_ms_per_solution": side["ours"]["children"] / n * 1e3,
        "floor_cpu_ms_per_solution": floor_cpu / n * 1e3,
        "ours_per_s": n / ours_s,
        "ours_vs_floor": ours_s / floor_s,
        "ours_vs_floor_cpu": ours_cpu / floor_cpu,
        "load_1min": os.getloadavg()[0],
    }
    if "lcb" in side:
        lcb_s = side["lcb"]["wall"]
        lcb_cpu = side["lcb"]["cpu"]
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


def _round(k: int, items, make_pool, lcb_python, args) -> tuple[dict, dict]:
    """One paired round: ours, LCB and the floor back to back, in the order of paired.order."""
    from microcoder.bench.judge.floor import run_floor
    from microcoder.bench.judge.lcb_run import run_lcb

    sides = ["ours", "lcb", "floor"] if lcb_python is not None else ["ours", "floor"]
    got: dict = {}
    for side in order(k, sides):
        if side == "ours":
            verdicts, wall, host, children = _ours(make_pool, items)
            got[side] = {"out": verdicts, "wall": wall, "host": host, "children": children}
            got[side]["cpu"] = host + children
        elif side == "lcb":
            acc, wall, meta, cpu = _timed(run_lcb, lcb_python, items, args.workers, args.timeout)
            got[side] = {"out": acc, "meta": meta, "wall": wall, "cpu": cpu}
        else:
            acc, wall, cpu = _timed(run_floor, items, args.workers)
            got[side] = {"out": acc, "wall": wall, "cpu": cpu}
    return _figures(len(items), got), got


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
    from microcoder.bench.judge.lcb_run import ensure_lcb_venv
    from microcoder.sandbox import JudgePool

    if args.language == "cpp":  # LiveCodeBench has no C++ judge; one workload is written in C++
        args.skip_lcb = True
        args.workloads = "overhead"
    lcb_python = None if args.skip_lcb else ensure_lcb_venv(Path(args.lcb_venv).resolve())
    rounds = max(1, args.repeat if args.repeat is not None else args.rounds)
    t0 = time.perf_counter()
    pin = not args.no_pin
    JudgePool(workers=args.workers, pin_cpus=pin).close()
    startup = time.perf_counter() - t0

    def make_pool():
        return JudgePool(
            workers=args.workers, time_limit_s=float(args.timeout), memory_mb=2048, pin_cpus=pin
        )

    if args.profile:
        from microcoder.bench.judge.profile import profile

        name = args.workloads.split(",")[0]
        return {"profile": profile(_load(name, args), make_pool), "workload": name}
    result = {
        "language": args.language,
        "workers": args.workers,
        "pin_cpus": pin,
        "timeout_s": args.timeout,
        "rounds": rounds,
        "pool_startup_s": startup,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "workloads": {},
    }
    for name in args.workloads.split(","):
        items = _load(name, args)
        load_before = load_average()
        runs = []
        got = {}
        for k in range(rounds):
            figures, got = _round(k, items, make_pool, lcb_python, args)
            runs.append(figures)
        row = {
            "solutions": len(items),
            "tests": sum(len(it.problem.tests) for it in items),
            "load_avg": os.getloadavg()[0],
            "load_before": load_before,
            "load_after": load_average(),
        }
        row.update(summarise(runs))
        row["runs"] = runs
        lcb = got.get("lcb", {})
        row.update(
            _compare(
                items, got["ours"]["out"], lcb.get("out"), lcb.get("meta"), got["floor"]["out"]
            )
        )
        result["workloads"][name] = row
    return result


def format_table(r: dict) -> str:
    if "profile" in r:
        from microcoder.bench.judge.profile import format_profile

        return f"workload {r['workload']}: " + format_profile(r["profile"])

    def f(x, fmt):
        return "-" if x is None else format(x, fmt)

    lines = [
        f"workers={r['workers']}, per-test limit {r['timeout_s']} s, {r.get('rounds', 1)} paired "
        f"round(s), pool start-up {r['pool_startup_s']:.2f} s (not in wall). cpu = CPU seconds "
        "of everything each judge ran (its process + reaped children).",
        f"{'workload':<10} {'sols':>5} {'tests':>6} | {'wall s ours/LCB/floor':>22} | "
        f"{'cpu s ours/LCB/floor':>22} | {'AC ours/LCB/floor':>17} | {'false o/L':>9} | disagree",
    ]
    for name, w in r["workloads"].items():
        acc = w["accepted"]
        fv = w["false_verdicts"]
        walls = f"{w['ours_s']:.2f}/{f(w.get('lcb_s'), '.2f')}/{w['floor_s']:.2f}"
        cpus = f"{w['ours_cpu_s']:.2f}/{f(w.get('lcb_cpu_s'), '.2f')}/{w['floor_cpu_s']:.2f}"
        accs = f"{acc['ours']}/{acc.get('lcb', '-')}/{acc['floor']}"
        lines.append(
            f"{name:<10} {w['solutions']:>5} {w['tests']:>6} | {walls:>22} | {cpus:>22} | "
            f"{accs:>17} | {fv['ours']:>4}/{fv.get('lcb', '-'):<4} | {w['disagreements']:>8}"
        )
    lines.append("ratios: median over rounds [min-max, IQR q1-q3]")
    for name, w in r["workloads"].items():
        s = w.get("spread", {})
        lines += [
            f"  {name}: LCB/ours wall {format_spread(s.get('speedup_vs_lcb'))}, "
            f"cpu {format_spread(s.get('speedup_vs_lcb_cpu'))}",
            f"  {name}: ours/floor wall {format_spread(s.get('ours_vs_floor'))}, "
            f"cpu {format_spread(s.get('ours_vs_floor_cpu'))}",
            f"  {name}: CPU ms per program ours {w['ours_cpu_ms_per_solution']:.2f} (host "
            f"{w.get('ours_host_cpu_ms_per_solution', 0):.2f} + sandboxes "
            f"{w.get('ours_sandbox_cpu_ms_per_solution', 0):.2f}), LCB "
            f"{f(w.get('lcb_cpu_ms_per_solution'), '.2f')}, floor "
            f"{f(w.get('floor_cpu_ms_per_solution'), '.2f')}; load average "
            f"{w.get('load_before', '-')} before, {w.get('load_after', '-')} after",
        ]
    for name, w in r["workloads"].items():
        for d in w["disagreement_list"][:12]:
            lines.append(
                f"  {name}: {d['solution']}: ours {d['ours']} ({d['ours_msg'][:70]}) LCB {d['lcb']} "
                f"({d['lcb_msg'][:60]}) floor {d['floor']} truth {d['truth']}"
            )
    return "\n".join(lines)

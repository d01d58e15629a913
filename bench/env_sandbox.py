"""`microcoder bench env-sandbox`: what an environment's program run costs through the executors.

A repair environment runs each turn's program on the visible tests in the executor pool
(actors/environments/executor_sandbox.py `ExecutorSandbox` → actors/executor.py
`Executor.run_program`). This bench runs the same small stdin program (`--calls` times, one
visible test) three ways, in one run on one machine:
- `local`: the executor's judge pool called in-process (`JudgePool.judge`), the floor;
- `executor`: through ExecutorSandbox and a real Executor actor on local Ray, first one call at a
  time (the Ray hop's latency over the floor), then from `--threads` threads at once, as a
  generator's trajectories call it;
- the concurrent run twice, on an executor with Ray's `max_concurrency` = 4 (before issue 48) and
  with actors/remote.py `EXECUTOR_THREADS`, so the table shows what the threads buy.

    microcoder bench env-sandbox [--calls 64] [--threads 32] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

DESCRIPTION = "environment program runs: local pool vs through the executors over Ray"
PROGRAM = "a, b = map(int, input().split())\nprint(a + b)\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=64, help="program runs per measurement")
    parser.add_argument("--threads", type=int, default=32, help="callers at once")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers of the executor")


def _problem():
    from microcoder.data.problem import Problem

    return Problem("add", "stdin", "Add.", [{"input": "1 2\n", "output": "3\n"}])


def _latencies(call, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def _concurrent(call, n: int, threads: int) -> tuple[float, list[str]]:
    """(wall seconds for `n` calls from `threads` threads, the verdicts)."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        verdicts = list(pool.map(lambda _: call(), range(n)))
    return time.perf_counter() - t0, verdicts


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    from microcoder.actors.environments.executor_sandbox import ExecutorSandbox
    from microcoder.actors.executor import Executor
    from microcoder.actors.remote import EXECUTOR_THREADS
    from microcoder.launch.run.cluster import init_local_ray
    from microcoder.sandbox import JudgePool
    from microcoder.sandbox.config import ExecutorConfig

    problem = _problem()
    cfg = ExecutorConfig(workers=args.workers, cpus_per_executor=1)
    result: dict[str, Any] = {
        "calls": args.calls,
        "threads": args.threads,
        "workers": args.workers,
        "executor_threads": EXECUTOR_THREADS,
    }
    with JudgePool(cfg) as pool:
        pool.judge(problem, PROGRAM)  # warm
        local = _latencies(lambda: pool.judge(problem, PROGRAM).verdict, args.calls)
        t0 = time.perf_counter()
        batch = pool.judge_many([(problem, PROGRAM)] * args.calls)
        result["local_batch_s"] = time.perf_counter() - t0
    result["local_median_ms"] = 1e3 * statistics.median(local)
    result["verdicts_right"] = all(v.verdict == "AC" for v in batch)
    init_local_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        for threads in (4, EXECUTOR_THREADS):
            name = f"mc-bench{threads}-executor-0"
            actor = ray.remote(num_cpus=1, max_concurrency=threads)(Executor)
            handle = actor.options(name=name).remote(name, cfg)
            ray.get(handle.ready.remote(), timeout=120)
            sandbox = ExecutorSandbox(timeout_s=120, names=[name])

            def call(sandbox=sandbox) -> str:
                return sandbox.run(problem, PROGRAM).verdict

            call()  # warm: the handle, the shared judge queue
            if threads == EXECUTOR_THREADS:
                over_ray = _latencies(call, args.calls)
                result["executor_median_ms"] = 1e3 * statistics.median(over_ray)
            wall, verdicts = _concurrent(call, args.calls, args.threads)
            result[f"concurrent_s_threads_{threads}"] = wall
            result["verdicts_right"] &= all(v == "AC" for v in verdicts)
            ray.kill(handle)
    finally:
        ray.shutdown()
    return result


def format_table(r: dict[str, Any]) -> str:
    t = r["executor_threads"]
    rows = [
        f"{r['calls']} runs of a one-test stdin program, {r['workers']} sandbox workers",
        f"one at a time, local pool        : {r['local_median_ms']:.1f} ms median",
        f"one at a time, through executor  : {r['executor_median_ms']:.1f} ms median "
        f"({r['executor_median_ms'] / r['local_median_ms']:.2f}x)",
        f"all at once, local pool (a batch): {r['local_batch_s']:.2f} s",
        f"{r['threads']} callers, executor with 4 threads : {r['concurrent_s_threads_4']:.2f} s",
        f"{r['threads']} callers, executor with {t} threads: {r[f'concurrent_s_threads_{t}']:.2f} s "
        f"({r['concurrent_s_threads_4'] / r[f'concurrent_s_threads_{t}']:.2f}x faster)",
        f"verdicts right: {r['verdicts_right']}",
    ]
    return "\n".join(rows)

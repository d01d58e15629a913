"""The floor: the same solutions run in-process with no isolation, in N forked processes.

Stdin programs get an in-memory stdin/stdout (with .buffer, so they behave like real files);
functional ones a fresh Solution() per test; assert tests run in the solution's namespace.
C++ programs (`--language cpp`) are compiled with the judge's command line (`g++ -O2
-std=c++17`) in a temporary directory and run once per test as a plain subprocess: no
bubblewrap, no fork server, no limits.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time

from microcoder.sandbox.childproc import FUNCTIONAL_IMPORTS
from microcoder.sandbox.compare import compare_output, compare_value

_ITEMS: list = []


def _run_stdin(code: str, test_input: str) -> str:
    stdin = io.TextIOWrapper(io.BytesIO(test_input.encode()), encoding="utf-8")
    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="utf-8")
    old = sys.stdin, sys.stdout
    sys.stdin = stdin
    sys.stdout = stdout
    try:
        exec(code, {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit:
        pass
    finally:
        stdout.flush()
        sys.stdin, sys.stdout = old
    return raw.getvalue().decode("utf-8", "replace")


def _run_cpp(code: str, tests: list[dict]) -> bool:
    with tempfile.TemporaryDirectory(prefix="floor-") as d:
        with open(os.path.join(d, "main.cpp"), "w") as f:
            f.write(code)
        gxx = ["g++", "-O2", "-std=c++17", "-o", "main", "main.cpp"]
        if subprocess.run(gxx, cwd=d, capture_output=True).returncode != 0:
            return False
        for t in tests:
            run = subprocess.run(
                [os.path.join(d, "main")], input=t["input"].encode(), capture_output=True
            )
            if (
                run.returncode
                or not compare_output(t["output"], run.stdout.decode("utf-8", "replace"))[0]
            ):
                return False
    return True


def _judge(index: int) -> tuple[int, bool, float]:
    item = _ITEMS[index]
    p = item.problem
    t0 = time.perf_counter()
    try:
        if p.language == "cpp":
            ok = _run_cpp(item.code, p.tests)
        elif p.kind == "stdin":
            ok = all(
                compare_output(t["output"], _run_stdin(item.code, t["input"]))[0] for t in p.tests
            )
        else:
            ns: dict = {"__name__": "__main__", "__builtins__": builtins}
            if p.kind == "functional":
                exec(FUNCTIONAL_IMPORTS, ns)
            exec(p.prelude + "\n" + item.code, ns)
            ok = True
            for t in p.tests:
                if p.kind == "functional":
                    args = [json.loads(line) for line in t["input"].split("\n") if line.strip()]
                    target = (
                        getattr(ns["Solution"](), p.fn_name) if "Solution" in ns else ns[p.fn_name]
                    )
                    ok = compare_value(t["output"], json.dumps(target(*args)))[0]
                else:
                    exec(t["code"], ns)
                if not ok:
                    break
    except BaseException:  # trusted code, but a wrong one may raise
        ok = False
    return index, ok, time.perf_counter() - t0


def _quiet() -> None:
    """Programs that write to fd 1 directly must not reach the benchmark's own stdout."""
    gc.freeze()  # like our fork server: the inherited heap stays out of the children's GC
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)


@contextlib.contextmanager
def _default_sigterm():
    """SIGTERM's default action while the floor's workers are forked. A worker forked from a
    process with other threads (a test process where Ray ran) can hang on a lock held at the
    fork; the pool's exit ends its workers with SIGTERM, which an inherited Python handler (Ray
    installs one) would never get to run in such a worker: the pool's exit then waited forever
    (a CI run's 300 s timeout). The default action ends it whatever it is doing."""
    try:
        old = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:  # not the main thread: nothing was changed
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run_floor(items: list, workers: int) -> tuple[list[bool], float]:
    """(accepted per item, wall seconds) with `workers` forked processes."""
    global _ITEMS
    _ITEMS = items
    sys.setrecursionlimit(50000)
    ctx = multiprocessing.get_context("fork")
    results = [False] * len(items)
    t0 = time.perf_counter()
    with _default_sigterm():  # what the workers inherit at fork
        pool = ctx.Pool(workers, initializer=_quiet)
    with pool:
        for index, ok, _ in pool.imap_unordered(_judge, range(len(items)), chunksize=1):
            results[index] = ok
    return results, time.perf_counter() - t0

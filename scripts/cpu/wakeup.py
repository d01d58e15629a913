"""What a wake-up costs on this host: a pipe round trip between two processes, on two CPUs (as
the scheduler places them) and on one (both pinned to the first CPU this process may use).

    python scripts/cpu/wakeup.py [ROUND_TRIPS]

Prints wall and CPU microseconds per round trip for each placement. Why the judge pins each
worker to one CPU (sandbox/claims.py, `executor.pin_cpus`): judging a short program is a chain
of such wake-ups between the host thread, the fork server and the program.
"""

from __future__ import annotations

import os
import resource
import sys
import time


def round_trips(n: int, cpu: int | None) -> tuple[float, float]:
    """(wall µs, CPU µs of both processes) per round trip."""
    if cpu is not None:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    start_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    pid = os.fork()
    if pid == 0:
        for _ in range(n):
            os.read(r1, 1)
            os.write(w2, b"x")
        os._exit(0)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        os.write(w1, b"x")
        os.read(r2, 1)
    wall, cpu_self = time.perf_counter() - t0, time.process_time() - c0
    os.waitpid(pid, 0)
    end_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = sum(
        getattr(end_children, f) - getattr(start_children, f) for f in ("ru_utime", "ru_stime")
    )
    for fd in (r1, w1, r2, w2):
        os.close(fd)
    if cpu is not None:
        os.sched_setaffinity(0, before)
    return wall / n * 1e6, (cpu_self + child) / n * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    first = min(os.sched_getaffinity(0))
    for name, cpu in (("free (the scheduler places them)", None), (f"both on CPU {first}", first)):
        wall, cpu_us = round_trips(n, cpu)
        print(f"{name}: {wall:.1f} us wall, {cpu_us:.1f} us CPU per round trip ({n} round trips)")


if __name__ == "__main__":
    main()

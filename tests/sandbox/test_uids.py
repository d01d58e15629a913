"""Sandbox uids: every worker of every pool on a host runs its programs as a uid of its own, so
the per-uid process bound (RLIMIT_NPROC, `max_processes`) counts one program's processes only."""

from __future__ import annotations

import os

import pytest

from microcoder.sandbox import JudgePool

from .conftest import stdin_problem

THREADS = stdin_problem([("", "ok\n")], pid="threads")
TWELVE_THREADS = (
    "import threading, time\n"
    "ts = [threading.Thread(target=time.sleep, args=(1.5,)) for _ in range(11)]\n"
    "for t in ts:\n    t.start()\n"
    "for t in ts:\n    t.join()\n"
    "print('ok')\n"
)

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="host uids are mapped only as root")


@root_only
def test_two_pools_judging_12_thread_programs_at_once_both_get_ac():
    """12 threads each under max_processes = 16: two programs at once fit only if their pools'
    workers run them as different host uids (shared uids: 24 > 16, a thread start fails: RE)."""
    with (
        JudgePool(workers=1, max_processes=16, time_limit_s=4.0) as a,
        JudgePool(workers=1, max_processes=16, time_limit_s=4.0) as b,
    ):
        for _ in range(2):
            a.submit(THREADS, TWELVE_THREADS)
            b.submit(THREADS, TWELVE_THREADS)
        got = [v.verdict for p in (a, b) for v in p.as_completed(timeout=60)]
    assert got == ["AC"] * 4, got

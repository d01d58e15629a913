"""Sandbox uids: every worker of every pool on a host runs its programs as a uid of its own, so
the per-uid process bound (RLIMIT_NPROC, `max_processes`) counts one program's processes only."""

from __future__ import annotations

import fcntl
import os
import time

import pytest

from microcoder.sandbox import JudgePool, claims

from .conftest import _servers, descendants, stdin_problem

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


def _real_uids(pids) -> set[int]:
    uids = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                uids |= {int(line.split()[1]) for line in f if line.startswith("Uid:")}
        except (OSError, ValueError):
            continue  # it ended meanwhile
    return uids


def host_uids(pool: JudgePool) -> set[int]:
    """Real host uids of the programs running in the pool's sandboxes now. A child caught
    between its fork and its setuid (sandbox/childproc.py `enter`, before any program code runs)
    still has its server's uid: not a program's, so left out."""
    servers = _servers(pool)
    return _real_uids(descendants(pool.worker_pids()) - servers) - _real_uids(servers)


@root_only
def test_two_pools_run_their_programs_as_disjoint_host_uids():
    """Every worker of every pool on the host has a uid of its own (old: base + slot, shared)."""
    with JudgePool(workers=2) as a, JudgePool(workers=2) as b:
        for p in (a, b):
            for _ in range(2):
                p.submit(THREADS, "import time\ntime.sleep(1.5)\nprint('ok')\n")
        seen = {id(a): set(), id(b): set()}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all(len(u) == 2 for u in seen.values()):
            for p in (a, b):
                seen[id(p)] |= host_uids(p)
            time.sleep(0.05)
        assert [v.verdict for p in (a, b) for v in p.as_completed(timeout=60)] == ["AC"] * 4
        ua, ub = seen[id(a)], seen[id(b)]
        assert len(ua) == 2 and len(ub) == 2 and not ua & ub, (ua, ub)
        claimed = [w.host_uid for p in (a, b) for w in p.workers]
    assert ua | ub == set(claimed) and all(u >= 61000 for u in claimed)


@root_only
def test_a_closed_pool_frees_its_uids():
    """Its processes hold no uid lock once it is closed. (Not "every uid is free": the host is
    shared, and another pool, of a parallel test or another checkout, may take a freed uid at
    once; /proc/locks names the holder.)"""
    with JudgePool(workers=2) as a:
        claimed = [w.host_uid for w in a.workers]
        ours = {os.getpid(), *a.worker_pids()}
        assert all(not free(uid) for uid in claimed)
        assert all(holders(uid) & ours for uid in claimed)
    assert not any(holders(uid) & ours for uid in claimed)


def holders(uid: int) -> set[int]:
    """The pids that hold `uid`'s lock file now (the kernel's /proc/locks, by the file's inode)."""
    inode = os.stat(os.path.join(claims.uid_lock_dir(), f"{uid}.lock")).st_ino
    with open("/proc/locks") as f:
        rows = [line.split() for line in f]
    return {int(r[4]) for r in rows if len(r) > 5 and r[5].rsplit(":", 1)[-1] == str(inode)}


def free(uid: int) -> bool:
    """Whether no worker on the host holds `uid` (its lock file can be locked)."""
    fd = os.open(os.path.join(claims.uid_lock_dir(), f"{uid}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)

"""actors/niceness.py on real processes: `lower` raises the niceness of every thread of a process
tree (a child and its extra thread included), `idle` also puts them under SCHED_IDLE, and
`restore` sets each back, also a process born while lowered; a user who could not set it back is left as it is. The actors' PriorityControl
lowers once until restored."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from microcoder.actors import niceness

# A parent that starts a child, and one more for each line it reads; each process runs a second
# thread, and sleeps until killed.
TREE = """
import subprocess, sys, threading, time
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
if sys.argv[1] == "parent":
    subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", ""])
    print("up", flush=True)
    for line in sys.stdin:
        subprocess.Popen(["sleep", "600"])
        print("spawned", flush=True)
time.sleep(600)
"""

DEADLINE_S = 30.0


@pytest.fixture
def tree():
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE, "parent", TREE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "up"
        t0 = time.monotonic()
        while len(niceness.process_tree(proc.pid)) < 2 or any(
            len(niceness.threads(p)) < 2 for p in niceness.process_tree(proc.pid)
        ):
            assert time.monotonic() - t0 < DEADLINE_S, "the child process did not start"
            time.sleep(0.05)
        yield proc
    finally:
        proc.stdin.close()
        for pid in reversed(niceness.process_tree(proc.pid)):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        proc.wait()


def all_nice(root: int) -> list[int]:
    return [
        niceness.thread_nice(t) for p in niceness.process_tree(root) for t in niceness.threads(p)
    ]


def all_policies(root: int) -> list[int]:
    tids = [t for p in niceness.process_tree(root) for t in niceness.threads(p)]
    return [os.sched_getscheduler(t) for t in tids]


def test_lower_then_restore_every_thread_of_the_tree(tree):
    before = all_nice(tree.pid)
    assert len(before) == 4  # parent and child, two threads each
    done = niceness.lower(4, root=tree.pid)
    assert done.skipped == "", done.skipped  # this test needs CAP_SYS_NICE or ulimit -e
    assert all_nice(tree.pid) == [min(19, n + 4) for n in before]
    niceness.restore(done, root=tree.pid)
    assert all_nice(tree.pid) == before


def test_lower_idle_puts_every_thread_under_sched_idle_and_back(tree):
    before, policies = all_nice(tree.pid), all_policies(tree.pid)
    assert set(policies) == {os.SCHED_OTHER}
    done = niceness.lower(4, root=tree.pid, idle=True)
    assert done.skipped == "", done.skipped
    assert all_policies(tree.pid) == [os.SCHED_IDLE] * 4
    tree.stdin.write("spawn\n")  # born under SCHED_IDLE, inherits it
    tree.stdin.flush()
    assert tree.stdout.readline().strip() == "spawned"
    niceness.restore(done, root=tree.pid)
    assert set(all_policies(tree.pid)) == {os.SCHED_OTHER}
    assert all_nice(tree.pid)[: len(before)] == before


def test_restore_also_sets_back_a_process_born_while_lowered(tree):
    before = niceness.thread_nice(tree.pid)
    done = niceness.lower(3, root=tree.pid)
    tree.stdin.write("spawn\n")  # a judge program forked while lowered, say
    tree.stdin.flush()
    assert tree.stdout.readline().strip() == "spawned"
    late = niceness.process_tree(tree.pid)[-1]
    assert late not in done.old and niceness.thread_nice(late) == min(19, before + 3)
    niceness.restore(done, root=tree.pid)
    assert niceness.thread_nice(late) == before
    assert all_nice(tree.pid) == [before] * len(all_nice(tree.pid))


def test_nothing_is_lowered_where_it_could_not_be_set_back(tree, monkeypatch):
    before = all_nice(tree.pid)
    monkeypatch.setattr(niceness, "can_restore", lambda to: False)
    done = niceness.lower(4, root=tree.pid)
    assert "ulimit -e" in done.skipped
    assert all_nice(tree.pid) == before


def test_can_restore_reads_the_nice_limit(monkeypatch):
    monkeypatch.setattr(niceness, "CAP_SYS_NICE", 200)  # no such capability bit: limit only
    monkeypatch.setattr(niceness.resource, "getrlimit", lambda which: (0, 0))
    assert not niceness.can_restore(15)
    monkeypatch.setattr(niceness.resource, "getrlimit", lambda which: (5, 5))
    assert niceness.can_restore(15) and not niceness.can_restore(14)


def test_priority_control_lowers_once_until_restored(monkeypatch):
    calls: list = []

    def lower(by, idle=False):
        calls.append((by, idle))
        return niceness.Lowered(by, idle)

    monkeypatch.setattr(niceness, "lower", lower)
    monkeypatch.setattr(niceness, "restore", lambda done: calls.append("restore"))
    actor = niceness.PriorityControl()
    assert actor.lower_priority(4, True) == "" and actor.lower_priority(4) == ""
    actor.restore_priority()
    actor.restore_priority()
    assert calls == [(4, True), "restore"]

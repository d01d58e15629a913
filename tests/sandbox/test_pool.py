"""The pool API the executor actor uses: submit, verdicts as they finish, crash recovery."""

from __future__ import annotations

import os
import signal

import pytest

from microcoder.sandbox import JudgePool, SandboxUnavailable
from microcoder.sandbox import bwrap as bwrap_module

from .conftest import stdin_problem

SUM = stdin_problem([("1 2\n", "3\n"), ("2 2\n", "5\n"), ("3 3\n", "6\n")], pid="sum")
OK = "a, b = map(int, input().split())\nprint(a + b)"


def test_verdicts_come_back_with_their_tags(pool):
    ids = {pool.submit(SUM, OK, solution_id=f"s{i}", tag=i) for i in range(6)}
    got = list(pool.as_completed(timeout=60))
    assert {v.job_id for v in got} == ids and sorted(v.tag for v in got) == list(range(6))
    assert all(v.solution_id == f"s{v.tag}" and v.problem_id == "sum" for v in got)


def test_early_exit_stops_at_the_first_failing_test(pool):
    v = pool.judge(SUM, OK)
    assert (v.verdict, v.passed, v.first_failed, v.reward) == ("WA", 1, 1, 0.0)


def test_partial_credit_runs_every_test():
    with JudgePool(workers=1, partial_credit=True) as p:
        v = p.judge(SUM, OK)
    assert (v.verdict, v.passed, v.total) == ("WA", 2, 3)
    assert v.reward == pytest.approx(2 / 3)


def test_missing_code_is_wrong_answer(pool):
    v = pool.judge(SUM, None)
    assert v.verdict == "WA" and v.reward == 0.0


def test_crashed_worker_is_replaced_transparently(pool):
    restarts = pool.restarts
    for pid in pool.worker_pids():
        os.kill(pid, signal.SIGKILL)
    verdicts = pool.judge_many([(SUM, OK)] * 4)
    assert [v.verdict for v in verdicts] == ["WA"] * 4
    assert pool.restarts >= restarts + 1 and all(v.attempts <= 2 for v in verdicts)


def test_refuses_to_run_without_bwrap_unless_configured(monkeypatch):
    monkeypatch.setattr(bwrap_module.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="isolation"):
        JudgePool(workers=1)


def test_isolation_none_warns_what_is_not_protected():
    with pytest.warns(UserWarning, match="WITHOUT a sandbox"):
        with JudgePool(workers=1, isolation="none") as p:
            assert p.judge(SUM, OK).first_failed == 1


def test_no_run_starts_after_the_first_failing_test(pool, monkeypatch):
    from microcoder.sandbox import worker as worker_module

    ops: list[str] = []
    real_recv = worker_module.WorkerProcess.recv

    def spy(self, timeout):
        header, payload = real_recv(self, timeout)
        ops.append(header["op"])
        return header, payload

    monkeypatch.setattr(worker_module.WorkerProcess, "recv", spy)
    restarts = pool.restarts
    first = pool.judge(SUM, OK)  # passes test 0, fails test 1: test 2 must never run
    assert ops == ["done", "done"] and first.first_failed == 1
    again = pool.judge(SUM, "a, b = map(int, input().split())\nprint(a + b + (a == b == 2))")
    assert again.verdict == "AC" and pool.restarts == restarts


def test_files_a_solution_leaves_are_gone_for_the_next():
    problem = stdin_problem([("", "clean\n")], pid="files")
    dirty = (
        "import os\nopen('left.txt', 'w').write('x')\nopen('/tmp/left2', 'w').write('x')\n"
        "os.mkdir('sub')\nos.chmod('.', 0o500)\nprint('clean')"
    )
    check = (
        "import os\nopen('new.txt', 'w').write('y')\n"
        "left = os.path.exists('left.txt') or os.path.exists('/tmp/left2') or os.path.exists('sub')"
        "\nprint('dirty' if left else 'clean')"
    )
    with JudgePool(workers=1) as p:  # one worker: both run in the same sandbox
        assert [v.verdict for v in p.judge_many([(problem, dirty), (problem, check)])] == [
            "AC",
            "AC",
        ]


def test_a_host_side_error_mid_solution_is_retried_and_the_pool_keeps_judging(monkeypatch):
    from microcoder.sandbox import grade

    real, calls = grade.compare_output, []

    def flaky(*args):
        calls.append(1)
        if len(calls) == 1:  # first comparison of the first solution: a bug in the judge
            raise ValueError("injected")
        return real(*args)

    monkeypatch.setattr(grade, "compare_output", flaky)
    good = "a, b = map(int, input().split())\nprint(a + b + (a == b == 2))"
    with JudgePool(workers=1) as p:
        ids = [p.submit(SUM, good), p.submit(SUM, good)]
        got = {v.job_id: v for v in p.as_completed(timeout=60)}  # a dead worker thread: Empty
    first, second = got[ids[0]], got[ids[1]]
    assert (first.verdict, first.attempts, second.verdict) == ("AC", 2, "AC")


def test_channels_get_their_own_verdicts_on_shared_workers(pool):
    a, b = pool.channel(), pool.channel()
    for i in range(3):
        a.submit(SUM, OK, tag=("a", i))
        b.submit(SUM, None, tag=("b", i))
    pool.submit(SUM, OK, tag=("pool", 0))
    got_b = sorted(v.tag for v in b.as_completed(timeout=60))
    got_a = sorted(v.tag for v in a.as_completed(timeout=60))
    assert got_a == [("a", i) for i in range(3)] and got_b == [("b", i) for i in range(3)]
    assert [v.tag for v in pool.as_completed(timeout=60)] == [("pool", 0)]
    assert a.pending == b.pending == pool.pending == 0


def test_workers_0_outside_ray_means_the_cores_this_process_may_use():
    from microcoder.sandbox.pool import resolve_workers

    assert resolve_workers(3) == 3
    assert resolve_workers(0) == len(os.sched_getaffinity(0))


DRAWS = stdin_problem([("\n", "first\n"), ("\n", "differ\n")], pid="draws")
DRAW_TWICE = (
    "import os, random\nx = str(random.getrandbits(64))\n"
    "if os.path.exists('d'):\n    print('differ' if open('d').read() != x else 'same')\n"
    "else:\n    open('d', 'w').write(x)\n    print('first')\n"
)


def test_every_run_gets_a_random_seed_of_its_own(pool):
    """The fork server reseeds `random` in each child with the C-level seed (childproc.
    import_random): a program's second test draws another number than its first (files stay
    between the tests of one solution), and two solutions draw different numbers."""
    v = pool.judge(DRAWS, DRAW_TWICE)
    assert v.verdict == "AC", (v.message, v.stdout)
    firsts = {pool.judge(DRAWS, "import random\nprint(random.random())").stdout for _ in range(3)}
    assert len(firsts) == 3

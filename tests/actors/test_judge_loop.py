"""The executor judges as a stream (actors/judge_loop.py: judging_loop): a group is leased and
starts as soon as workers free up, with no wave cap. Real sandbox (bubblewrap), programs that
sleep: wall time, so two cores suffice."""

from __future__ import annotations

import threading
import time

import pytest

from microcoder.actors.judge_loop import judging_loop
from microcoder.actors.scoring import ScoringOutcome, score_groups
from microcoder.actors.timing import PoolTimer
from microcoder.data.problem import validate_problem
from microcoder.protocol import Group, Response
from microcoder.sandbox import JudgePool
from microcoder.sandbox import pool as pool_module

SLEEPER = validate_problem(
    {"id": "sleep", "kind": "stdin", "tests": [{"input": "", "output": "ok\n"}]}
)
SLEEP_1S = "```python\nimport time\ntime.sleep(1.0)\nprint('ok')\n```"


class ListClient:
    """A buffer client that leases the given groups, then none; records what comes back."""

    def __init__(self, groups: list[Group]):
        self.queue, self.leases, self.scored, self.failed = list(groups), [], [], []
        self.lock = threading.Lock()

    def get_unscored(self, n: int, wait_s: float = 0.0) -> list[Group]:
        with self.lock:
            got, self.queue = self.queue[:n], self.queue[n:]
            self.leases.append((n, len(got)))
        if not got and wait_s:
            time.sleep(min(wait_s, 0.05))
        return got

    def put_scored(self, scores) -> None:
        self.scored += scores

    def fail_group(self, group_id: int, reason: str) -> None:
        self.failed.append((group_id, reason))


def groups(n: int, g: int, text: str, problem_id: str = "sleep") -> list[Group]:
    return [
        Group(group_id=i, problem_id=problem_id, responses=[Response(None, None, text)] * g)
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def pool24():
    with JudgePool(workers=24, time_limit_s=3.0) as p:
        yield p


@pytest.fixture
def concurrency(monkeypatch):
    """Counts the programs being judged at once (wraps the real judge_solution)."""
    state = {"now": 0, "peak": 0}
    lock, real = threading.Lock(), pool_module.judge_solution

    def counting(*args, **kwargs):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(pool_module, "judge_solution", counting)
    return state


def test_24_workers_judge_12_groups_of_2_one_second_programs_at_once(pool24, concurrency):
    """Waves of 4 groups would take 3 s and peak at 8 programs; a stream runs all 24 at once."""
    client = ListClient(groups(12, 2, SLEEP_1S))

    def judge(gs):  # as Executor._judge: one channel of the pool per call
        return score_groups(pool24.channel(), {"sleep": SLEEPER}, gs, "ex")

    t0 = time.monotonic()
    stats = judging_loop(
        client, judge, lambda out: None, PoolTimer(), threading.Event(), slots=24, max_groups=12
    )
    wall = time.monotonic() - t0
    assert sorted(gs.group_id for gs in client.scored) == list(range(12)), client.failed
    assert all(s.verdict == "AC" for gs in client.scored for s in gs.scores)
    assert concurrency["peak"] == 24
    assert wall <= 1.8, f"{wall:.2f} s"
    assert stats.groups == 12 and stats.max_inflight_responses <= 24 + 2 * 2


def test_leases_ahead_are_bounded_by_workers_and_group_size():
    """It keeps at most `slots` + G responses unjudged before it leases, and learns G from the
    first lease (one group)."""
    release = threading.Event()

    def judge(gs):
        release.wait(5)
        return ScoringOutcome()

    client = ListClient(groups(40, 4, "x", problem_id="p"))
    stop = threading.Event()
    loop = threading.Thread(
        target=judging_loop,
        args=(client, judge, lambda out: None, PoolTimer(), stop),
        kwargs={"slots": 8},
    )
    loop.start()
    time.sleep(0.5)
    leased = sum(got for _, got in client.leases)
    stop.set()
    release.set()
    loop.join(10)
    assert client.leases[0] == (1, 1)
    assert leased == 3  # 1 group, then ceil((8 + 4 - 4) / 4) = 2: 12 < 8 + 4 + 4 responses


def test_a_judge_that_raises_fails_its_group_and_the_loop_goes_on():
    def judge(gs):
        if gs[0].group_id == 1:
            raise ValueError("boom")
        return ScoringOutcome(scored=[gs[0].group_id])

    client = ListClient(groups(3, 2, "x", problem_id="p"))
    stats = judging_loop(
        client, judge, lambda out: None, PoolTimer(), threading.Event(), slots=2, max_groups=3
    )
    assert sorted(client.scored) == [0, 2] and stats.groups == 3
    assert client.failed == [(1, "the judge raised ValueError: boom")]


def test_on_stop_it_hands_in_the_groups_in_flight_and_leases_no_more():
    stop, started = threading.Event(), threading.Event()

    def judge(gs):
        started.set()
        time.sleep(0.3)
        return ScoringOutcome(scored=[gs[0].group_id])

    client = ListClient(groups(10, 2, "x", problem_id="p"))
    loop = threading.Thread(
        target=judging_loop,
        args=(client, judge, lambda out: None, PoolTimer(), stop),
        kwargs={"slots": 2},
    )
    loop.start()
    assert started.wait(5)
    stop.set()
    loop.join(5)
    leased = sum(got for _, got in client.leases)
    assert not loop.is_alive() and len(client.scored) == leased < 10


def test_a_judge_that_raises_after_stop_leaves_its_group_leased_for_release():
    """After stop, a raise most likely means the pool was closed under the judge: the group is
    not failed (counted against the problem) but left to release(), to be judged elsewhere."""
    stop, started = threading.Event(), threading.Event()

    def judge(gs):
        started.set()
        time.sleep(0.3)
        raise RuntimeError("JudgePool was closed while this channel waited for verdicts")

    client = ListClient(groups(1, 2, "x", problem_id="p"))
    out = {}
    loop = threading.Thread(
        target=lambda: out.update(
            stats=judging_loop(client, judge, lambda o: None, PoolTimer(), stop, slots=2)
        )
    )
    loop.start()
    assert started.wait(5)
    stop.set()
    loop.join(5)
    assert client.failed == [] and client.scored == []
    assert (out["stats"].groups, out["stats"].left_leased) == (0, 1)

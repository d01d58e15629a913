"""actors/generate_loop.py: a generator whose loop waits (admission control holds its next prompt, its
groups in flight finished) sits near 0% CPU, and asks rank 0 for weights after a lease only when
the buffer's reply names a newer version (issue 33, "Why" 11). A unit test: the engine is a
stand-in whose groups finish after a short sleep, the buffer client answers as the real buffer
does (a long poll held until admission opens, `retry_after_s` = its long poll when it refuses);
the loop is the product's. CPU is this process's CPU time, not wall time, with a generous
bound (it used about 0.01 CPU s in 2.5 s; the loop that spun, 0.3 s with the machine loaded
and thousands of turns a second), so a loaded machine does not fail it."""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time

import pytest
from engine_testing.loop import FutureEngine, run_loop

from microcoder.protocol import Group, PromptAssignment, Prompts


class SleepingEngine(FutureEngine):
    """Each group finishes `group_s` after it is submitted (on a timer thread)."""

    def __init__(self, group_s: float) -> None:
        self.group_s = group_s

    def started(self, group_id: int, future: concurrent.futures.Future) -> None:
        done = Group(group_id=group_id, problem_id=f"p{group_id}")
        threading.Timer(self.group_s, _finish, (future, done)).start()


def _finish(future: concurrent.futures.Future, group: Group) -> None:
    try:
        future.set_result(group)
    except concurrent.futures.InvalidStateError:
        pass  # the loop cancelled it at stop


class AdmissionClient:
    """Admission control as the buffer applies it: one prompt may be leased per `step_s` (the
    learner's step); a lease that waits (`wait_s` > 0) is held until then, as the server holds a
    long poll; a refused one says `retry_after_s` = the long poll (1 s), as the server does."""

    def __init__(self, step_s: float, version: int = 0) -> None:
        self.step_s, self.version, self.t0 = step_s, version, time.monotonic()
        self.issued, self.put = 0, []

    def _open(self) -> bool:
        return self.issued <= (time.monotonic() - self.t0) / self.step_s

    def get_prompts(self, n: int, wait_s: float = 0.0) -> Prompts:
        if not self._open() and wait_s > 0:
            opens = self.t0 + self.issued * self.step_s
            time.sleep(max(0.0, min(opens, time.monotonic() + wait_s) - time.monotonic()))
        if not self._open():
            return Prompts(assignments=[], done=False, retry_after_s=1.0, version=self.version)
        a = PromptAssignment(group_id=self.issued, problem_id="p", prompt="p")
        self.issued += 1
        return Prompts(assignments=[a], done=False, version=self.version)

    def put_unscored(self, groups) -> None:
        self.put += [g.group_id for g in groups]


def run_for(wall_s: float, client, engine, **kw):
    stop = threading.Event()
    threading.Timer(wall_s, stop.set).start()
    return run_loop(client, engine, capacity=4, stop=stop, **kw)


@pytest.mark.timeout(30)
def test_a_generator_waiting_on_admission_control_does_not_spin():
    # Each group outlasts the loop's first tick, so the loop asks for more while it is in
    # flight and is refused; the group then finishes and the loop has nothing in flight until
    # admission opens again. The loop that spun there turned thousands of times a second.
    wall_s = 2.5
    client = AdmissionClient(step_s=0.4)
    cpu0, t0 = time.process_time(), time.monotonic()
    stats = run_for(wall_s, client, SleepingEngine(group_s=0.15))
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    assert stats.groups >= 2 and stats.lease_calls >= 2  # it did work and did wait
    assert cpu < 0.05 * wall, f"the waiting loop used {cpu:.2f} CPU s in {wall:.1f} s"
    # Load-proof too: a spinning loop given little CPU still turns thousands of times a second.
    assert stats.ticks / wall < 200, (
        f"the loop turned {stats.ticks} times in {wall:.1f} s with at most one group in flight"
    )


@pytest.mark.timeout(30)
def test_after_a_lease_rank0_is_asked_only_when_the_buffer_names_a_newer_version():
    for buffer_version, asks in ((0, False), (1, True)):
        asked_after_lease = []
        run_for(
            0.6,
            AdmissionClient(step_s=0.1, version=buffer_version),
            SleepingEngine(group_s=0.01),
            after_lease=functools.partial(asked_after_lease.append, 1),
        )
        assert bool(asked_after_lease) is asks, (buffer_version, len(asked_after_lease))

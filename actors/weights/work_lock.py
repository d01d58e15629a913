"""`WorkLock`: rank 0's learner calls (train, publish, save) and its weight sends over NCCL
channels take turns (actors/learner_rank.py holds one; actors/weights/publisher.py and
actors/weights/relay_hub.py send under it)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class WorkLock:
    """Train, publish, save (the learner's collectives) and weight sends over NCCL channels
    never overlap: two streams of collectives on one GPU (FSDP2's NCCL group and a weight
    channel) can deadlock NCCL, and on CPU they would only fight for the same cores. Learner
    calls run one at a time; sends run together (each channel has its own peers, so one slow
    or dead receiver never holds another generator's sync).

    A step is open from the end of a `train` to the end of the `publish` that follows it: sends
    also wait while it is open, so a send that arrives during a step waits for the whole step
    and then sends the version it produced, instead of slipping in between with the previous
    one and delaying the publish. Learner calls wait only for each other (they come from one
    driver, in order), so no sequence of learner calls can wait on itself.

    Order: every waiter takes a ticket. A learner call also waits for the sends that asked
    before it (except while a step is open: those wait for its publish), and a send for the
    learner calls that asked before it, so the sends that waited through a step go before the
    next train, and a stream of sends never keeps a train out.

    No deadlock with sends: a send waits only for this lock, and a holder (a train or publish)
    waits only for the other learner ranks, which never wait for a send. A send waits at most
    `timeout_s` (the generator's receiver gives up after the same time) and then fails, naming
    the fix, rather than broadcasting to a peer that has left.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._learner_busy = False  # a learner call is running
        self._sends = 0  # sends running
        self._step_open = False  # a train has ended and its publish has not
        self._tickets = itertools.count()
        self._waiting_sends: set[int] = set()
        self._waiting_learner: set[int] = set()

    def _learner_may_go(self, ticket: int) -> bool:
        if self._learner_busy or self._sends:
            return False
        return self._step_open or not any(t < ticket for t in self._waiting_sends)

    def _send_may_go(self, ticket: int) -> bool:
        if self._learner_busy or self._step_open:
            return False
        return not any(t < ticket for t in self._waiting_learner)

    @contextmanager
    def learner(self, opens_step: bool = False, closes_step: bool = False) -> Iterator[None]:
        """Run learner work alone; `opens_step` (train, on success) keeps sends out until a
        `closes_step` call (publish) ends."""
        with self._cond:
            ticket = next(self._tickets)
            self._waiting_learner.add(ticket)
            self._cond.wait_for(lambda: self._learner_may_go(ticket))
            self._waiting_learner.discard(ticket)
            self._learner_busy = True
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._cond:
                self._learner_busy = False
                if opens_step and ok:
                    self._step_open = True
                if closes_step:
                    self._step_open = False
                self._cond.notify_all()

    @contextmanager
    def send(self, timeout_s: float, name: str) -> Iterator[float]:
        """Run a weight send outside any learner call and step (other sends may run beside it);
        yields the seconds it waited for that."""
        t0 = time.perf_counter()
        with self._cond:
            ticket = next(self._tickets)
            self._waiting_sends.add(ticket)
            free = self._cond.wait_for(lambda: self._send_may_go(ticket), timeout_s)
            self._waiting_sends.discard(ticket)
            if not free:
                self._cond.notify_all()  # a learner call may have waited for this ticket
                raise TimeoutError(
                    f"weights for generator {name}: the learner's step kept rank 0 busy for more "
                    f"than {timeout_s:.0f} s, and the generator stops waiting after that; raise "
                    "learner.sync_timeout_s above the longest step (compute_s + sync_s)"
                )
            self._sends += 1
        try:
            yield time.perf_counter() - t0
        finally:
            with self._cond:
                self._sends -= 1
                self._cond.notify_all()

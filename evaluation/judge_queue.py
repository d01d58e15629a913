"""Many concurrent evaluation calls on one JudgePool (inside an Executor actor).

A JudgePool is driven from one thread. An executor actor serves several `judge_samples` calls
at once (Ray threads), and judging one call after another would leave sandbox workers idle at
the end of every call. So calls hand their jobs to one serving thread, which submits each
call's jobs as soon as it arrives (keeping every worker busy across calls), routes the verdicts
back, and wakes each caller when its last verdict is in. The pool lock is held only while eval
jobs are outstanding. An executor's training loop judges through channels of the same pool
(`JudgePool.channel`, actors/judge_loop.py), so its groups and these jobs share the workers'
queue in the order they were submitted.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any

from microcoder.data.problem import Problem


class _Call:
    def __init__(self, jobs: Sequence[tuple[Problem, str]]):
        self.jobs = list(jobs)
        self.verdicts: list[Any] = [None] * len(self.jobs)
        self.left = len(self.jobs)
        self.done = threading.Event()
        self.error: BaseException | None = None


class SharedJudge:
    """Judge (problem, code) lists from several threads on one pool; `lock` guards the pool."""

    def __init__(self, pool, lock: threading.Lock, poll_s: float = 0.02):
        self.pool = pool
        self.lock = lock
        self.poll_s = poll_s
        self._incoming: queue.Queue[_Call | None] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="eval-judge")
        self._thread.start()
        self.judged = 0

    def judge(self, jobs: Sequence[tuple[Problem, str]], timeout_s: float | None = None) -> list:
        """Verdicts of `jobs`, in order (blocks until all are in)."""
        call = _Call(jobs)
        if not call.jobs:
            return []
        self._incoming.put(call)
        if not call.done.wait(timeout_s):
            raise TimeoutError(f"{len(call.jobs)} programs not judged within {timeout_s} s")
        if call.error is not None:
            raise RuntimeError(f"judging failed: {call.error}") from call.error
        return call.verdicts

    def close(self) -> None:
        self._incoming.put(None)

    def _serve(self) -> None:
        while (call := self._incoming.get()) is not None:
            with self.lock:
                self._serve_burst(call)

    def _serve_burst(self, first: _Call) -> None:
        outstanding = 0
        pending = [first]
        while pending or outstanding:
            for call in pending:
                try:
                    for i, (problem, code) in enumerate(call.jobs):
                        self.pool.submit(problem, code, tag=(call, i))
                        outstanding += 1
                except Exception as e:  # the caller gets it
                    call.error = e
                    call.done.set()
            pending = []
            while True:  # calls that arrived meanwhile join this burst
                try:
                    nxt = self._incoming.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._incoming.put(None)  # stop after this burst
                    break
                pending.append(nxt)
            if not outstanding:
                continue
            try:
                verdict = next(self.pool.as_completed(timeout=self.poll_s))
            except queue.Empty:
                continue
            outstanding -= 1
            call, i = verdict.tag
            call.verdicts[i] = verdict
            call.left -= 1
            self.judged += 1
            if call.left == 0 and call.error is None:
                call.done.set()

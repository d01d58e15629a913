"""JudgePool: N sandboxed fork servers judging many (problem, code) pairs concurrently.

One host thread per worker drives its fork server (blocking pipe I/O releases the GIL, and the
host does only framing and comparison); with `pin_cpus` the thread, the server and its programs
share one CPU (sandbox/claims.py). A worker that dies, hangs or breaks the protocol is
replaced and the solution re-run (`retries`); only then is it reported as SE.

Every worker takes jobs from one FIFO queue. The pool's own `submit`/`as_completed` are for one
thread; `channel()` gives another thread (e.g. one executor thread per group being judged) its
own submit/as_completed on the same workers: a channel's verdicts go to that channel only.
"""

from __future__ import annotations

import itertools
import os
import queue
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from microcoder.data.problem import JUDGED_KINDS, Problem
from microcoder.sandbox.bwrap import SandboxUnavailable, check_available
from microcoder.sandbox.claims import pin_this_thread
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.grade import judge_solution
from microcoder.sandbox.verdict import Verdict, score
from microcoder.sandbox.worker import WorkerCrash, WorkerProcess

NO_ISOLATION_WARNING = (
    'executor.isolation = "none": programs run WITHOUT a sandbox. They can read every file the '
    "judge can (including expected outputs and problem files), use the network, see other "
    "processes, fill the disk and leave processes behind; the process-count limit is not "
    "enforced. Use this only for trusted code (e.g. reference solutions)."
)


@dataclass
class _Job:
    job_id: int
    problem: Problem
    code: str | None
    solution_id: str
    tag: Any
    done: queue.Queue
    """Where its verdict goes: the pool's queue, or a channel's."""


class JudgePool:
    """Judge solutions in sandboxed worker processes; use from one thread (see package doc)."""

    def __init__(self, config: ExecutorConfig | None = None, **overrides):
        cfg = (config or ExecutorConfig()).model_copy(update=overrides)
        ExecutorConfig.model_validate(cfg.model_dump())
        check_available(cfg)
        if cfg.isolation == "none":
            warnings.warn(NO_ISOLATION_WARNING, stacklevel=2)
            print(f"microcoder judge: WARNING: {NO_ISOLATION_WARNING}", file=sys.stderr)
        self.cfg = cfg
        self.size = resolve_workers(cfg.workers)
        self._jobs: queue.Queue = queue.Queue()
        self._done: queue.Queue = queue.Queue()
        self._ids = itertools.count()
        self._pending = 0
        self._closed = False
        self.restarts = 0
        self._channels: weakref.WeakSet[JudgeChannel] = weakref.WeakSet()
        self._channels_lock = threading.Lock()
        self.workers: list[WorkerProcess] = []
        try:
            for slot in range(self.size):
                self.workers.append(WorkerProcess(cfg, slot))  # as root: claims a host uid
        except BaseException:
            for w in self.workers:
                w.close()
            raise
        started: queue.Queue = queue.Queue()
        self._threads = [
            threading.Thread(target=self._serve, args=(w, started), daemon=True, name=f"judge-{i}")
            for i, w in enumerate(self.workers)
        ]
        for t in self._threads:
            t.start()
        errors = [e for e in (started.get() for _ in self._threads) if e is not None]
        if errors:
            self.close()
            raise SandboxUnavailable(f"could not start the judge's sandbox: {errors[0]}")

    # -- public API ---------------------------------------------------------------------------
    def submit(
        self, problem: Problem, code: str | None, solution_id: str = "", tag: Any = None
    ) -> int:
        """Queue one solution (code None = nothing extracted: scored WA); returns its job id."""
        job_id = self._enqueue(problem, code, solution_id, tag, self._done)
        self._pending += 1
        return job_id

    def _enqueue(self, problem, code, solution_id, tag, done: queue.Queue) -> int:
        if self._closed:
            raise RuntimeError("JudgePool is closed")
        check_judged(problem)
        job = _Job(next(self._ids), problem, code, solution_id, tag, done)
        self._jobs.put(job)
        return job.job_id

    def channel(self) -> JudgeChannel:
        """A submit/as_completed of its own on this pool's workers, for one other thread."""
        ch = JudgeChannel(self)
        with self._channels_lock:
            self._channels.add(ch)
        return ch

    @property
    def pending(self) -> int:
        """Submitted solutions whose verdict has not been taken yet."""
        return self._pending

    def as_completed(self, timeout: float | None = None) -> Iterator[Verdict]:
        """Yield verdicts as they finish until none is pending (queue.Empty after `timeout` s idle)."""
        while self._pending:
            verdict = self._done.get(timeout=timeout)
            self._pending -= 1
            yield verdict

    def judge_many(self, pairs: Iterable[tuple[Problem, str | None]]) -> list[Verdict]:
        """Judge (problem, code) pairs and return verdicts in input order."""
        ids = [self.submit(p, c) for p, c in pairs]
        by_id = {v.job_id: v for v in self.as_completed()}
        return [by_id[i] for i in ids]

    def judge(self, problem: Problem, code: str | None) -> Verdict:
        """Judge one solution (blocking)."""
        return self.judge_many([(problem, code)])[0]

    def worker_pids(self) -> list[int]:
        """Host pids of the running fork servers' sandboxes (for diagnostics and tests)."""
        return [w.pid for w in self.workers if w.pid is not None]

    def close(self) -> None:
        """Stop every worker (idempotent). Pending solutions are dropped."""
        if self._closed:
            return
        self._closed = True
        with self._channels_lock:
            channels = list(self._channels)
        for ch in channels:
            ch._done.put(None)  # a channel still waiting learns that its jobs are dropped
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self) -> JudgePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- worker threads ----------------------------------------------------------------------
    def _serve(self, worker: WorkerProcess, started: queue.Queue) -> None:
        try:
            worker.start()
        except Exception as e:  # reported to the constructor
            started.put(f"{type(e).__name__}: {e}")
            worker.close()
            return
        started.put(None)
        if worker.cpu is not None:
            pin_this_thread(worker.cpu)  # beside its fork server (sandbox/claims.py)
        try:
            while (job := self._jobs.get()) is not None:
                job.done.put(self._run(worker, job))
        finally:
            worker.close()

    def _run(self, worker: WorkerProcess, job: _Job) -> Verdict:
        total = len(job.problem.tests)
        if job.code is None:
            v = Verdict(
                "WA",
                0,
                total,
                first_failed=0,
                message="no code found in the response",
                reward=score("WA", 0, total, self.cfg.partial_credit),
            )
        else:
            v = None
            attempts = 0
            while v is None:
                attempts += 1
                try:
                    if worker.proc is None:
                        worker.start()
                    v = judge_solution(worker, job.problem, job.code, self.cfg)
                except Exception as e:  # WorkerCrash, OSError, or a host-side bug
                    # (e.g. a problem's checker raising): the protocol may be mid-request, so the
                    # worker is replaced either way; never let the worker thread die.
                    if not isinstance(e, (WorkerCrash, OSError)):
                        e = RuntimeError(f"{type(e).__name__} in the judge: {e}")
                    self.restarts += 1
                    worker.stop()
                    if attempts > self.cfg.retries:
                        v = Verdict(
                            "SE", 0, total, message=f"sandbox fault: {e}"[:500], reward=None
                        )
            v.attempts = attempts
        v.problem_id = job.problem.id
        v.solution_id = job.solution_id
        v.job_id = job.job_id
        v.tag = job.tag
        return v


class JudgeChannel:
    """`submit`, `pending` and `as_completed` as on the pool, for one thread's own jobs; the
    pool's workers and queue are shared (FIFO with every other user of the pool)."""

    def __init__(self, pool: JudgePool):
        self.pool = pool
        self._pending = 0
        self._done: queue.Queue = queue.Queue()

    def submit(
        self, problem: Problem, code: str | None, solution_id: str = "", tag: Any = None
    ) -> int:
        job_id = self.pool._enqueue(problem, code, solution_id, tag, self._done)
        self._pending += 1
        return job_id

    @property
    def pending(self) -> int:
        return self._pending

    def as_completed(self, timeout: float | None = None) -> Iterator[Verdict]:
        """This channel's verdicts as they finish (queue.Empty after `timeout` s idle; raises
        RuntimeError when the pool is closed meanwhile: its jobs were dropped)."""
        while self._pending:
            verdict = self._done.get(timeout=timeout)
            if verdict is None:
                self._done.put(None)
                raise RuntimeError("JudgePool was closed while this channel waited for verdicts")
            self._pending -= 1
            yield verdict


def check_judged(problem: Problem) -> None:
    """Refuse a problem whose kind is not a program the sandbox runs (every backend's check)."""
    if problem.kind not in JUDGED_KINDS:
        raise ValueError(
            f"problem {problem.id}: kind {problem.kind!r} is not a program the sandbox runs; "
            "its reward function scores it (executor.reward, sandbox/rewards/plugin.py)"
        )


def resolve_workers(workers: int) -> int:
    """`executor.workers`, where 0 means the CPUs this process may use: inside a Ray actor or
    task, the CPUs Ray granted it (`get_assigned_resources()["CPU"]`, rounded down, at least
    1); outside Ray, the cores of the host this process may run on (its CPU affinity)."""
    if workers > 0:
        return workers
    granted = ray_granted_cpus()
    if granted is not None:
        return max(1, int(granted))
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def ray_granted_cpus() -> float | None:
    """CPUs Ray granted this worker process (an actor's num_cpus), or None outside a Ray worker
    or when it was granted none. Reads Ray only when the process already imported it."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    except AssertionError:  # the driver: Ray grants resources to workers only
        return None
    return cpus or None

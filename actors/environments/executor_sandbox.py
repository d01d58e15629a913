"""The environments' sandbox in a run: programs run by the run's executor actors over Ray.

    sandbox = ExecutorSandbox(timeout_s=cfg.environment.sandbox_timeout_s)   # in a generator
    run = sandbox.run(problem, code)        # -> ProgramRun, judged by an executor's pool

The executors are the Ray named actors `mc-executor-<i>` of the run (launch/run/cluster.py
names every replica `mc-<name>`, in the job's namespace), found with `ray.util.list_named_actors`
(or given by name, or as handles), listed again when one died, when none is known, and every `refresh_s`
seconds (`microcoder scale` adds replicas). Calls go to them in turn. Each call
(actors/executor.py `Executor.run_program`) judges on the executor's own judge pool, through
the queue `judge_samples` shares (evaluation/judge_queue.py `SharedJudge`), so environment runs
and training groups take the same sandbox workers in submission order.

Deadlines and faults (never guessed at):
- every call has `timeout_s` (`environment.sandbox_timeout_s`), the executor's own judging
  the same: past it the run is verdict SE (the repair environment ends the trajectory there);
- an executor that died (or is restarting) mid-call: the call is made once more on another
  executor (on a named one that Ray restarts, the same one when it is the only one); a second
  death is an SE too;
- no executor found within `timeout_s` (none named so, or every one given as a handle died):
  `EnvSandboxError` naming what to check (the step raises, so the trajectory's group fails
  like an engine error).

On the wire everything is a plain dict: the problem as `problem_to_wire` (our JSONL schema's
fields, without the statement, references and `meta` the judge does not read), the answer as
`run_to_wire` (ProgramRun's fields); `program_run_of` makes a ProgramRun of the judge's Verdict.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any

from microcoder.data.problem import Problem
from microcoder.protocol import ProgramRun
from microcoder.sandbox.verdict import Verdict

EXECUTOR_PREFIX = "mc-executor-"
"""The Ray names of a run's executor replicas (launch/run/cluster.py: `mc-<pool kind>-<i>`)."""
EXECUTOR_MARGIN_S = 0.5
"""The executor's judging deadline is this much before the call's (half the call's at most)."""
_PROBLEM_FIELDS = tuple(f.name for f in fields(Problem))
_RUN_FIELDS = tuple(f.name for f in fields(ProgramRun))


class EnvSandboxError(RuntimeError):
    """No executor could run the program; the message says what to check."""


def problem_to_wire(problem: Problem) -> dict[str, Any]:
    """`problem` as a plain dict of its fields, less what judging never reads (the statement,
    the starter code, `solutions`, `public_tests`, `meta`): the tests in it are the ones run."""
    row = {name: getattr(problem, name) for name in _PROBLEM_FIELDS}
    row.update(prompt="", starter_code="", solutions=[], public_tests=[], meta={})
    return row


def problem_from_wire(row: dict[str, Any]) -> Problem:
    """The Problem `problem_to_wire` sent (a fresh one: its `meta` is the judge's own cache)."""
    return Problem(**{**row, "meta": {}})


def program_run_of(verdict: Verdict) -> ProgramRun:
    """The judge's Verdict as an environment's ProgramRun (the same facts and excerpts)."""
    return ProgramRun(
        verdict=verdict.verdict,
        passed=verdict.passed,
        total=verdict.total,
        first_failed=verdict.first_failed,
        message=verdict.message,
        stdout=verdict.stdout,
        stderr=verdict.stderr,
        time_s=verdict.time_s,
    )


def run_to_wire(run: ProgramRun) -> dict[str, Any]:
    return asdict(run)


def run_from_wire(row: dict[str, Any]) -> ProgramRun:
    return ProgramRun(**{k: row[k] for k in _RUN_FIELDS if k in row})


def sandbox_error(total: int, message: str) -> ProgramRun:
    """The run of a program nobody could judge: verdict SE."""
    return ProgramRun(verdict="SE", passed=0, total=total, first_failed=None, message=message)


def _ray():
    import ray

    return ray


class ExecutorSandbox:
    """`EnvSandbox` on the run's executors (see the module doc). Thread-safe: a generator runs
    many trajectories' steps at once from its worker threads."""

    def __init__(
        self,
        timeout_s: float,
        names: Sequence[str] | None = None,
        prefix: str = EXECUTOR_PREFIX,
        refresh_s: float = 30.0,
        handles: Mapping[str, Any] | None = None,
    ):
        """`names`: the executors' Ray names (None: every live named actor starting with
        `prefix`, listed in this job's namespace). `handles`: the executors' handles by name
        instead, for executors that have no Ray name (`microcoder eval`'s): one that died is
        not called again."""
        self.timeout_s = timeout_s
        self.names = list(names) if names is not None else None
        self.given = dict(handles) if handles is not None else None
        self._dead: set[str] = set()
        self.prefix = prefix
        self.refresh_s = refresh_s
        self._handles: dict[str, Any] = {}
        self._listed_at = -float("inf")
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self.calls = 0
        self.retries = 0
        self.errors = 0

    def run(self, problem: Problem, code: str | None) -> ProgramRun:
        ray = _ray()
        deadline = time.monotonic() + self.timeout_s
        wire = problem_to_wire(problem)
        total = len(problem.tests)
        failed: list[str] = []
        for attempt in range(2):
            name, handle = self._pick(failed, deadline)
            left = max(deadline - time.monotonic(), 0.001)
            # the executor's own deadline comes first, so it answers SE naming itself
            ref = handle.run_program.remote(wire, code, max(left - EXECUTOR_MARGIN_S, left / 2))
            try:
                row = ray.get(ref, timeout=left)
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref)  # a call still queued at the executor is dropped
                self.errors += 1
                return sandbox_error(
                    total, f"executor {name} gave no verdict within {self.timeout_s:g} s"
                )
            except ray.exceptions.RayActorError as err:  # died, or restarting (unavailable)
                failed.append(name)
                self._forget(name)
                if attempt == 0:
                    self.retries += 1
                    continue
                self.errors += 1
                return sandbox_error(total, f"executors {', '.join(failed)} died: {err}"[:500])
            self.calls += 1
            return run_from_wire(row)
        raise AssertionError("unreachable")

    def _pick(self, avoid: list[str], deadline: float) -> tuple[str, Any]:
        """The next executor in turn, not one of `avoid` unless it is the only one; waits (to
        `deadline`) for one to appear."""
        while True:
            with self._lock:
                if not self._handles or time.monotonic() - self._listed_at > self.refresh_s:
                    self._list()
                names = sorted(self._handles)
                if names:
                    fresh = [n for n in names if n not in avoid] or names
                    name = fresh[next(self._turn) % len(fresh)]
                    return name, self._handles[name]
            if time.monotonic() >= deadline:
                if self.given is not None:
                    where = f"a live one of the executors {sorted(self.given)}"
                elif self.names is not None:
                    where = f"the named actors {self.names}"
                else:
                    where = f"a Ray named actor starting with {self.prefix!r}"
                raise EnvSandboxError(
                    f"no executor to run the environment's program: {where} was not found "
                    f"within {self.timeout_s:g} s (are the run's executors up? "
                    "environment.sandbox_timeout_s bounds this wait)"
                )
            time.sleep(min(0.5, max(deadline - time.monotonic(), 0.0)))

    def _list(self) -> None:
        """Look the executors up again (the caller holds the lock)."""
        self._listed_at = time.monotonic()
        if self.given is not None:
            self._handles = {n: h for n, h in self.given.items() if n not in self._dead}
            return
        ray = _ray()
        if self.names is not None:
            wanted = self.names
        else:
            wanted = [n for n in ray.util.list_named_actors() if n.startswith(self.prefix)]
        handles = {}
        for name in wanted:
            try:
                handles[name] = (
                    self._handles[name] if name in self._handles else ray.get_actor(name)
                )
            except ValueError:  # not (or no longer) alive
                continue
        self._handles = handles

    def _forget(self, name: str) -> None:
        with self._lock:
            self._dead.add(name)  # kept out only of `handles` (a named one may be restarted)
            self._handles.pop(name, None)
            self._listed_at = -float("inf")  # list again before the next call

"""A pool of replicas of one actor kind (generators or executors): start, scale, supervise.

Each replica runs its loop (`run()`) as a long Ray task. Supervision (`check()`, called every
~2 s by the launcher's supervisor thread, launch/run/supervisor.py, independent of learner steps): a
loop that ended with an actor error means the process died; Ray restarts the actor
(max_restarts), the pool returns the dead replica's leases to the buffer (its prompts or groups
are re-queued, none lost), and a later `check()` starts its loop again once the new process is
ready.
A generator always pulls the newest weights before its first wave, so a restarted or added
replica never samples with stale weights.
A replica's placement group (GPUs, launch/run/placement.py) lives as long as the replica: Ray
restarts a dead process inside the same group, and a replica that leaves the pool (scaled down,
given up on, shut down) is killed and its group removed, so its GPUs are free for the next one.
Readiness has a deadline (`ready_timeout_s`, the run's cluster.ready_timeout_s): a replica that
neither becomes ready nor fails within it (a stuck engine start) is given up on, named, with
its log file and the field to raise, never left pending for ever.
Restarts are bounded (`RestartBudget`): a replica that dies, or whose `ready()` raises (a
generator whose replacement engine cannot start), more than `max_restarts` times within
`restart_window_s` is not restarted again; the pool's `fatal` then says why, with the last
error (a generator's carries its vLLM engine's own error) and the remedy, and the supervisor
stops the run (launch/run/supervisor.py). A failure that comes back after every restart (a model
the engine cannot run, an out-of-memory at start) is not transient: restarting it for ever
would only hide it.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from microcoder.actors.deadline import get_within
from microcoder.launch.run.placement import release
from microcoder.protocol import ActorMemory


def _locked(method):
    """Run a Pool method under the pool's lock (the supervisor thread and the loop share pools)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Dead\w*))\b(:.*)?$")


def error_summary(err: BaseException, limit: int = 300) -> str:
    """The cause of an actor error in one line: Ray's text starts with `ray::Actor.method()
    (pid=…)` and a traceback; the exception type and message are its last `XxxError: …` line."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    for line in reversed(lines):
        if _EXC_LINE.match(line) and not line.startswith("ray::"):
            return line[:limit]
    return (lines[0] if lines else type(err).__name__)[:limit]


def _raised_by_the_actor(err: BaseException) -> bool:
    """Whether a call failed because of the actor's own code: its method raised (Ray's
    RayTaskError), or its constructor did (an ActorDiedError from its creation task, which Ray
    does not retry); not because the process is gone or being restarted."""
    try:
        from ray.exceptions import ActorDiedError, RayTaskError
    except ImportError:
        return False
    if isinstance(err, ActorDiedError):
        return "creation task" in str(err)
    return isinstance(err, RayTaskError)


CONTROL_S = 60.0
"""How long a control call to a live replica (set a temperature) may take: the actors are
threaded, so it answers at once however busy the replica is; past this it is stuck."""


def _log_of(name: str) -> str:
    """The replica's log file (actors/logs.py), as the error should show it."""

    folder = os.environ.get("MICROCODER_ACTOR_LOG_DIR", "RUN_DIR/logs")
    return os.path.join(folder, f"{name}.log")


def with_log(name: str) -> str:
    """A replica's name with its log file, as errors that name it show it."""
    return f"{name} (log {_log_of(name)})"


MAX_RESTARTS = 5
"""Restarts of one replica allowed within RESTART_WINDOW_S before the pool gives up on it."""
RESTART_WINDOW_S = 600.0


@dataclass
class RestartBudget:
    """At most `max_restarts` failures of one replica within `window_s` seconds: `spend(now)`
    records one and says whether the budget still allows a restart."""

    max_restarts: int = MAX_RESTARTS
    window_s: float = RESTART_WINDOW_S
    failures: list[float] = field(default_factory=list)

    def spend(self, now: float) -> bool:
        self.failures = [t for t in self.failures if now - t < self.window_s] + [now]
        return len(self.failures) <= self.max_restarts


@dataclass
class Replica:
    name: str
    handle: Any
    loop: Any = None
    ready: Any = None
    restarts: int = 0
    started: float = field(default_factory=time.time)
    budget: RestartBudget = field(default_factory=RestartBudget)


def answers(refs: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """{name: the answer of its Ray call `refs[name]`, or the exception it raised (a call that
    took longer than `timeout_s` raises GetTimeoutError)}."""
    import ray

    out: dict[str, Any] = {}
    for name, ref in refs.items():
        try:
            out[name] = ray.get(ref, timeout=timeout_s)
        except Exception as err:
            out[name] = err
    return out


class Pool:
    """Replicas named `{kind}-{i}`; `make(name)` creates one actor handle (not yet ready)."""

    def __init__(
        self,
        kind: str,
        make: Callable[[str], Any],
        release: Callable[[str], Any],
        log=print,
        ready_timeout_s: float = 900.0,
        max_restarts: int = MAX_RESTARTS,
        restart_window_s: float = RESTART_WINDOW_S,
        runs_loop: bool = True,
    ):
        self.kind = kind
        self.runs_loop = runs_loop
        """False: its replicas run no loop (`run()`), they only answer calls (the generators set
        aside for the eval, launch/run/eval_beside.py); a dead one is restarted by Ray itself
        (max_restarts) and found by the next call that fails."""
        self.make = make
        self.release = release
        self.log = log
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.fatal = ""
        """Why a replica was given up on after too many restarts ("" while none was): the run
        cannot go on as configured (launch/run/supervisor.py stops it)."""
        self._lock = threading.RLock()
        self.replicas: dict[str, Replica] = {}
        self.pending: list[Replica] = []
        self.ready_timeout_s = ready_timeout_s
        self._next = 0
        self.errors: list[str] = []
        self._seen_errors: set[tuple[Any, Any]] = set()

    def __len__(self) -> int:
        return len(self.replicas)

    @_locked
    def handles(self) -> list[Any]:
        return [r.handle for r in self.replicas.values()]

    @_locked
    def add(
        self, n: int, before_loop: Callable[[Any], None] | None = None, wait: bool = True
    ) -> list[str]:
        """Start `n` replicas. wait=True: block until ready and start their loops; wait=False:
        return at once, `check()` starts each loop when its replica is ready (a live run keeps
        training while new vLLM engines start)."""

        new = []
        for _ in range(n):
            name = f"{self.kind}-{self._next}"
            self._next += 1
            r = Replica(
                name,
                self.make(name),
                budget=RestartBudget(self.max_restarts, self.restart_window_s),
            )
            r.ready = r.handle.ready.remote()
            new.append(r)
        if not wait:
            self.pending.extend(new)
            return [r.name for r in new]
        get_within(
            [r.ready for r in new],
            self.ready_timeout_s,
            "starting",
            [with_log(r.name) for r in new],
            "the cluster may lack free CPUs/GPUs for it (see the placement plan), or its start is "
            "slow: raise cluster.ready_timeout_s",
        )
        for r in new:
            self._start_loop(r, before_loop)
        return [r.name for r in new]

    def _start_loop(self, r: Replica, before_loop) -> None:
        if before_loop is not None:
            before_loop(r.handle)
        if self.runs_loop:
            r.loop = r.handle.run.remote()
        self.replicas[r.name] = r

    def _promote_ready(self, before_loop) -> list[str]:
        """Start the loops of pending replicas that became ready."""
        import ray

        if not self.pending:
            return []
        done, _ = ray.wait(
            [r.ready for r in self.pending], num_returns=len(self.pending), timeout=0
        )
        started = []
        for r in [r for r in self.pending if r.ready not in done]:
            if time.time() - r.started > self.ready_timeout_s:  # neither ready nor failed: stuck
                self.pending.remove(r)
                self.discard(r)
                msg = (
                    f"{r.name} failed to start within {self.ready_timeout_s:.0f} s: it was "
                    f"still not ready (stuck starting; its log: {_log_of(r.name)}); raise "
                    "cluster.ready_timeout_s if it is only slow"
                )
                self.errors.append(msg)
                started.append(msg)
        for r in [r for r in self.pending if r.ready in done]:
            try:
                ray.get(r.ready)
            except Exception as err:
                if _raised_by_the_actor(err) and not r.budget.spend(time.time()):
                    self.pending.remove(r)  # its ready() itself failed, time after time
                    started.append(self._give_up(r, error_summary(err), "its restarts"))
                    continue
                # A call made while Ray restarts the process fails at once ("temporarily
                # unavailable"), and a replica may fail once to start: ask again until the start
                # deadline, then give up loudly.
                if time.time() - r.started < self.ready_timeout_s:
                    r.ready = r.handle.ready.remote()
                    continue
                self.pending.remove(r)
                self.discard(r)  # no longer counted: it must not hold its CPUs/GPUs either
                msg = f"{r.name} failed to start within {self.ready_timeout_s:.0f} s: {error_summary(err)}"
                self.errors.append(msg)
                started.append(msg)
                continue
            self.pending.remove(r)
            self._start_loop(r, before_loop)
            started.append(f"{r.name} {'restarted' if r.restarts else 'started'}")
        return started

    @_locked
    def remove(self, n: int, timeout_s: float = 60.0) -> list[str]:
        """Stop the `n` newest replicas: finish their current wave, return leases, shut down."""
        import ray

        cancelled = []
        while n > 0 and self.pending:  # replicas still starting go first
            r = self.pending.pop()
            self.discard(r)
            cancelled.append(r.name)
            n -= 1
        victims = list(self.replicas.values())[-n:] if n > 0 else []
        for r in victims:
            r.handle.stop.remote()
        for r in victims:
            try:
                ray.get(r.loop, timeout=timeout_s)
            except Exception as err:
                self.log(f"{r.name}: did not stop cleanly ({err}); killing it")
            self.shutdown_replica(r)
            del self.replicas[r.name]
        return cancelled + [r.name for r in victims]

    @_locked
    def scale_to(self, n: int, before_loop=None) -> tuple[list[str], list[str]]:
        """Add or remove replicas until there are `n` (counting ones still starting); returns
        (added, removed). Added replicas start in the background (see `check`)."""
        have = len(self) + len(self.pending)
        if n > have:
            return self.add(n - have, before_loop, wait=False), []
        if n < have:
            return [], self.remove(have - n)
        return [], []

    @_locked
    def check(self, before_loop=None) -> list[str]:
        """Restart the loops of replicas whose process died; returns what was done."""
        import ray

        events = self._promote_ready(before_loop)
        loops = {r.loop: r for r in self.replicas.values() if r.loop is not None}
        if not loops:
            return events
        done, _ = ray.wait(list(loops), num_returns=len(loops), timeout=0)
        for ref in done:
            r = loops[ref]
            try:
                ray.get(ref)
                r.loop = None  # the loop ended by itself (stopped, or the data is done)
                continue
            except Exception as err:
                reason = error_summary(err)
            released = self.release(r.name)
            if not r.budget.spend(time.time()):
                del self.replicas[r.name]
                self.log(self._give_up(r, reason, f"returned its leases ({released})"))
                continue
            r.restarts += 1
            msg = f"{r.name} died ({reason}); returned its leases ({released}); restarting (restart #{r.restarts})"
            self.log(msg)
            self.errors.append(msg)
            # Ray is restarting the process; its loop starts again once it is ready (_promote_ready).
            r.loop = None
            r.ready = r.handle.ready.remote()
            r.started = time.time()
            del self.replicas[r.name]
            self.pending.append(r)
        return events

    def _give_up(self, r: Replica, reason: str, done: str) -> str:
        """`r` failed more often than its restart budget allows: kill it for good and set
        `fatal` (the run stops); returns the message, which names the last error and the fix."""
        budget = r.budget
        msg = (
            f"{r.name} failed {len(budget.failures)} times within {budget.window_s:.0f} s "
            f"(more than the {budget.max_restarts} restarts allowed), the last: {reason}; {done}; "
            "not restarting it again: a failure that comes back after every restart is not "
            f"transient. Fix its cause, named above and in its log ({_log_of(r.name)}): for a "
            "vLLM engine that cannot run the model (an unsupported configuration) or runs out of "
            "memory, change the model or the generator settings (generator.kv_cache_gib, "
            "gpu_memory_utilization, max_prompt_tokens + max_response_tokens); then launch again "
            "(--resume keeps the steps trained)"
        )
        self.errors.append(msg)
        self.fatal = self.fatal or msg
        self.discard(r)
        return msg

    def call_all(self, method: str, *args: Any, timeout_s: float = CONTROL_S) -> list[Any]:
        """Call `method(*args)` on every running replica and wait for all, within `timeout_s`;
        a replica that does not answer is named (with its log) in the error."""

        with self._lock:
            items = list(self.replicas.items())
        return get_within(
            [getattr(r.handle, method).remote(*args) for _, r in items],
            timeout_s,
            method,
            [with_log(name) for name, _ in items],
            "it is stuck: see its log; killing its process makes the pool restart it",
        )

    def report_errors(self, stats: list[dict[str, Any]]) -> list[str]:
        """Errors replicas reported in `stats` (their `errors`: [[time, message]]) that were not
        seen before; they are kept in `errors` (status: last errors) and returned to be logged."""
        new = []
        for st in stats:
            for when, msg in st.get("errors") or []:
                key = (st.get("name"), when)
                if key in self._seen_errors:
                    continue
                self._seen_errors.add(key)
                new.append(str(msg))
        self.errors.extend(new)
        del self.errors[:-100]
        return new

    @_locked
    def stats(self, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        out = []
        for name, got in self._ask_all("stats", timeout_s).items():
            if isinstance(got, Exception):
                out.append({"name": name, "error": str(got).splitlines()[0][:200]})
            else:
                out.append({**got, "restarts": self.replicas[name].restarts})
        return out

    @_locked
    def memory(self, timeout_s: float = 5.0) -> list[ActorMemory]:
        """Every replica's `memory()` (actors/memory.py); a replica that does not answer within
        `timeout_s` (dead, restarting) is left out."""
        got = self._ask_all("memory", timeout_s).values()
        return [m for m in got if isinstance(m, ActorMemory)]

    def _ask_all(self, method: str, timeout_s: float) -> dict[str, Any]:
        """{replica name: its answer to `method()`, or the exception its call raised}."""
        refs = {name: getattr(r.handle, method).remote() for name, r in self.replicas.items()}
        return answers(refs, timeout_s)

    def shutdown_replica(self, r: Replica) -> None:
        import ray

        try:
            ray.get(r.handle.shutdown.remote(), timeout=30)
        except Exception:
            pass
        self.discard(r)

    def discard(self, r: Replica) -> None:
        """Kill the replica's process for good and remove its placement group, if it has one."""
        import ray

        try:
            ray.kill(r.handle, no_restart=True)
        finally:
            release(r.name)

    @_locked
    def shutdown(self) -> None:
        import ray

        for r in self.pending:
            self.discard(r)
        self.pending.clear()
        for r in self.replicas.values():
            r.handle.stop.remote()
        for r in self.replicas.values():
            if r.loop is not None:
                try:
                    ray.get(r.loop, timeout=60)
                except Exception:
                    pass
            self.shutdown_replica(r)
        self.replicas.clear()

"""The held-out eval beside training (eval.beside_training): the learner keeps stepping while
the eval runs, and the eval samples at one fixed policy version.

Which generators: with eval.generators = N > 0, the N generators set aside for the eval (the pool
"eval-generator", launch/run/cluster.py: no training loop, weights over their own channels, never
the relay); the training generators are then never held and take every new version as without
an eval. With eval.generators = 0 (the default), the training generators, as described below.
Everything below holds for either pool ("every running generator" = every one of that pool),
but only the training generators have a loop that samples on held weights.

At an eval point (after learner step N, before step N+1 is asked for) the driver asks every
running generator to take the learner's newest weights and keep them (`Generator.hold_weights`,
within learner.sync_timeout_s per generator, named when late). Those at version N are the eval's
generators; the eval (launch/run/heldout_eval.py `evaluate`) then runs in a background thread on them
and on the executors, on the engines' spare capacity: the generators' training loops go on
sampling on the held weights, and the learner goes on stepping on those groups as far as the
buffer's staleness bound allows (buffer.max_staleness + 1 steps past N; after that the learner
waits for fresh groups until the eval releases the weights). When the eval ends, every held
generator is released (`release_weights`) and takes the newest weights at its next tick.

On a CPU run the learner shares its cores with the engines and the judge, so the eval's work
stretches the learner's steps. Opt-in (`eval.nice` > 0, `eval.sched_idle`; off by default, as
measured in bench/RESULTS.md): while the eval runs, the held generators (engine included), the
executors (judge programs included) and the driver's eval thread run nicer (`lower_pool`,
actors/niceness.py) and are restored after it, so the learner takes the CPU first and the eval
gets the cycles it leaves. A GPU run's eval samples on the generators' GPUs, never the
learner's: nothing is lowered there.

At most one eval is in flight: an eval point reached while one runs first waits for it (the
learner waits too, logged; eval.every steps should outlast an eval) for at most eval.wait_s, and
is skipped (logged, and an "event" record event="eval_skipped") if it is still running then. A
failed eval stops the run as a blocking one would: its error is raised in the training loop at the
next step. At the end of the run the final eval, if due, is started the same way and awaited for
at most eval.wait_s (then the run ends without its record, saying so).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from microcoder.actors.deadline import get_within
from microcoder.launch.run import heldout_eval as evaluation
from microcoder.launch.run.pools import with_log

HOLD_REMEDY = (
    "the generator did not take the learner's weights in time (its log says why); raise "
    "learner.sync_timeout_s if it is only slow, or set eval.beside_training = false"
)


def eval_pool(run):
    """The pool an eval holds and samples on: the generators set aside for it (eval.generators
    > 0), else the training generators."""
    return run.eval_generators if run.cfg.eval.generators else run.generators


def hold_pool(run) -> tuple[int, dict[str, Any]]:
    """Every running generator of the eval's pool (`eval_pool`) takes the newest weights and
    keeps them. Returns (the learner's version, {name: handle} of the generators holding exactly
    it); the others are released."""

    version = int(run.learners.version)
    replicas = {name: r.handle for name, r in dict(eval_pool(run).replicas).items()}
    refs = {name: h.hold_weights.remote() for name, h in replicas.items()}
    held: dict[str, Any] = {}
    for name, ref in refs.items():
        try:
            got = get_within(
                ref, run.cfg.learner.sync_timeout_s, "hold_weights", with_log(name), HOLD_REMEDY
            )
        except Exception as err:  # that generator is left out of this eval
            run.log(f"eval at step {version}: {name} left out: {str(err).splitlines()[-1]}")
            got = None
        if got == version:
            held[name] = replicas[name]
        else:
            if got is not None:
                run.log(f"eval at step {version}: {name} holds version {got}, not {version}")
            release_pool(run, {name: replicas[name]})
    return version, held


def release_pool(run, held: dict[str, Any]) -> None:
    """`release_weights` on each held generator (within learner.sync_timeout_s; a generator
    that does not answer is logged: its next restart drops the hold)."""
    _call_each(
        run,
        held,
        "release_weights",
        remedy="see its log; it keeps the eval's weights until it is restarted",
        failed="could not release {name} after the eval",
    )


def _call_each(
    run,
    actors: dict[str, Any],
    method: str,
    *args,
    remedy: str = "see its log",
    failed: str = "{method} on {name} failed",
) -> dict[str, Any]:
    """`method(*args)` on each actor (all asked at once), each answer awaited within
    learner.sync_timeout_s; {name: its answer} of those that answered. One that did not is
    logged as `failed` (formatted with name and method), its deadline error naming `remedy`."""

    refs = {name: getattr(h, method).remote(*args) for name, h in actors.items()}
    out: dict[str, Any] = {}
    for name, ref in refs.items():
        try:
            out[name] = get_within(
                ref, run.cfg.learner.sync_timeout_s, method, with_log(name), remedy
            )
        except Exception as err:
            why = str(err).splitlines()[-1]
            run.log(f"{failed.format(name=name, method=method)}: {why}")
    return out


def lower_pool(run, held: dict[str, Any]) -> dict[str, Any]:
    """On a CPU run with eval.nice > 0 or eval.sched_idle: the held generators and every executor
    run lower while the eval runs (actors/niceness.py), so the learner, which shares their cores,
    takes the CPU first. Returns the actors asked ({name: handle}) for `restore_pool`. A GPU
    run's eval samples on the generators' GPUs, not the learner's: nothing is lowered there."""
    by = run.cfg.eval.nice
    if (by <= 0 and not run.cfg.eval.sched_idle) or run.cfg.cluster.device != "cpu":
        return {}
    actors = dict(held)
    actors.update({name: r.handle for name, r in dict(run.executors.replicas).items()})
    idle = run.cfg.eval.sched_idle
    for name, why in _call_each(run, actors, "lower_priority", by, idle).items():
        if why:
            run.log(f"eval.nice: {name} not lowered: {why}")
    return actors


def restore_pool(run, lowered: dict[str, Any]) -> None:
    """`restore_priority` on the actors `lower_pool` lowered."""
    if lowered:
        _call_each(run, lowered, "restore_priority")


def lower_this_thread(run) -> None:
    """The driver's eval thread (its sample bookkeeping and report) also runs eval.nice nicer on
    a CPU run; raising a thread's niceness needs no right, and the thread ends with the eval."""
    if run.cfg.cluster.device == "cpu":
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + run.cfg.eval.nice))
        if run.cfg.eval.sched_idle:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))


def activity(state: str, step: int, version: int, held: dict[str, Any]) -> dict[str, Any]:
    """The Run's `eval_activity` (what status and the dashboard show of the eval's pool)."""
    return {
        "state": state,
        "step": step,
        "version": version,
        "replicas": sorted(held),
        "since": time.time(),
    }


class EvalBeside:
    """One held-out eval at a time in a background thread (see the module docstring)."""

    def __init__(self, run, wait_s: float):
        self.run = run
        self.wait_s = wait_s
        self.step: int | None = None
        """The step of the eval in flight (or of the last one)."""
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, step: int) -> bool:
        """Start the eval at `step` beside training, after the one in flight (awaited for at most
        eval.wait_s); False (logged) when that one is still running then, or no generator holds
        the learner's version."""
        self.raise_if_failed()
        if self.busy():
            self.run.log(f"eval at step {step}: waiting for the eval at step {self.step} first")
            if not self.wait():
                self._skip(step, f"the eval at step {self.step} is still running")
                return False
        version, held = hold_pool(self.run)
        if not held:
            self._skip(step, f"no generator holds policy version {version}")
            return False
        self.step = step
        self._error = None
        self.run.eval_activity = activity("evaluating", step, version, held)
        self._thread = threading.Thread(
            target=self._run, args=(step, version, held), name=f"eval-step-{step}", daemon=True
        )
        self._thread.start()
        return True

    def _run(self, step: int, version: int, held: dict[str, Any]) -> None:
        lowered: dict[str, Any] = {}
        error: BaseException | None = None
        try:
            lower_this_thread(self.run)
            lowered = lower_pool(self.run, held)
            evaluation.evaluate(self.run, step, generators=held, held_version=version)
        except BaseException as err:  # raised in the training loop (raise_if_failed)
            error = err
        finally:
            try:
                restore_pool(self.run, lowered)
                release_pool(self.run, held)
                self.run.eval_activity = activity("idle", step, version, held)
            finally:  # the loop sees the error only once the generators are released
                self._error = error

    def _skip(self, step: int, why: str) -> None:
        msg = f"eval at step {step} skipped: {why}"
        self.run.log(msg)
        self.run.metrics.log("event", event="eval_skipped", step=step, message=msg)

    def raise_if_failed(self) -> None:
        """Raise the error of the eval that failed (once)."""
        err = self._error
        self._error = None
        if err is not None:
            raise err

    def wait(self) -> bool:
        """Await the eval in flight for at most eval.wait_s; False (logged) if it is still
        running then. Raises its error if it failed."""
        if self._thread is not None:
            t0 = time.monotonic()
            self._thread.join(self.wait_s)
            if self._thread.is_alive():
                self.run.log(
                    f"the eval at step {self.step} did not finish within eval.wait_s = "
                    f"{self.wait_s:g} s (waited {time.monotonic() - t0:.0f} s): it goes on "
                    "without being waited for, and the run may end without its record; raise "
                    "eval.wait_s to wait longer"
                )
                return False
        self.raise_if_failed()
        return True

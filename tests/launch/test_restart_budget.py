"""launch/run/pools.py: restarts are bounded (issue 33, fault 7). A replica whose loop dies again
after every restart (a vLLM engine that cannot run the model) is given up on after
`max_restarts` within the window; the pool's `fatal` names its last error (the engine's own)
and the fix, and the supervisor stops the run. The pool runs a real Ray actor; the generator's
half (an engine that died is noticed by `ready()` and its own error read from the log) is
tested on its pieces: actors/engines/async_llm.py `AsyncEngine.dead`, actors/logs.py
`last_error_line`."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from microcoder.launch.run.pools import Pool, RestartBudget

ENGINE_ERROR = "RuntimeError: Unsupported CPU attention configuration: head_dim=16"


class DiesAtEveryStart:
    """A generator whose engine dies at the first step of every loop (EngineDeadError, with the
    engine's own error in the text, as actors/generator.py `EngineDiedError` gives it)."""

    def ready(self) -> dict:
        return {"ok": True}

    def run(self) -> None:
        raise RuntimeError(
            f"generator-0: its vLLM engine died; the engine's own error: {ENGINE_ERROR}"
        )

    def shutdown(self) -> None:
        pass


class StandInLLM:
    """What AsyncEngine calls of vLLM's AsyncLLM at start (the version label), and `errored`."""

    errored = False

    async def update_weight_version(self, version: str) -> None:
        pass


def test_the_budget_allows_max_restarts_within_the_window_and_forgets_older_ones():
    budget = RestartBudget(max_restarts=2, window_s=10.0)
    assert budget.spend(0.0) and budget.spend(1.0)
    assert not budget.spend(2.0)  # a third failure within 10 s
    assert budget.spend(30.0)  # the old ones left the window


@pytest.mark.timeout(120)
def test_a_replica_that_dies_after_every_restart_stops_the_pool_with_its_error_and_the_fix(
    ray_cluster,
):
    import ray

    released: list[str] = []
    logged: list[str] = []
    cls = ray.remote(num_cpus=0, max_restarts=-1)(DiesAtEveryStart)
    pool = Pool(
        "generator",
        lambda name: cls.options(name=f"mc-test-{name}").remote(),
        lambda name: released.append(name) or "3 prompts, 0 groups",
        logged.append,
        ready_timeout_s=60,
        max_restarts=2,
        restart_window_s=600,
    )
    pool.add(1)
    deadline = time.monotonic() + 60
    while not pool.fatal and time.monotonic() < deadline:
        pool.check()
        time.sleep(0.2)
    assert pool.fatal, f"the pool kept restarting: {logged}"
    assert ENGINE_ERROR in pool.fatal
    assert "generator-0 failed 3 times within 600 s" in pool.fatal
    assert "not restarting it again" in pool.fatal and "generator settings" in pool.fatal
    assert released == ["generator-0"] * 3  # its leases went back at every death
    assert len(pool) == 0 and not pool.pending
    assert sum("restarting (restart #" in line for line in logged) == 2


def test_the_supervisor_stops_the_run_when_a_pool_gave_up():
    from microcoder.launch.run.supervisor import Supervisor

    stopped: list[str] = []
    pool = SimpleNamespace(check=lambda before_loop=None: [], fatal="generator-0 failed 6 times")
    run = SimpleNamespace(
        fatal="",
        generators=pool,
        executors=SimpleNamespace(check=lambda before_loop=None: [], fatal=""),
        prepare_generator=None,
        stop_for_replica=stopped.append,
        learners=SimpleNamespace(version=0),
        log=print,
        metrics=SimpleNamespace(log=lambda *a, **k: None),
    )
    sup = Supervisor.__new__(Supervisor)
    sup.run, sup._ticks, sup.errors_every = run, 0, 3
    sup.watch = SimpleNamespace(check=lambda: "", failing=False)
    sup.inbox, sup._stop = None, threading.Event()
    sup.tick()
    assert stopped == ["generator-0 failed 6 times"]


def test_the_engines_own_error_is_read_from_the_actors_log(tmp_path):
    from microcoder.actors.generator import engine_root_cause

    log = tmp_path / "generator-0.log"
    log.write_text(
        "(EngineCore_DP0 pid=77) ERROR 12-03 [core.py:700]     raise RuntimeError(msg)\n"
        f"(EngineCore_DP0 pid=77) ERROR 12-03 [core.py:700] {ENGINE_ERROR}\n"
        "Traceback (most recent call last):\n"
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
        "trace (above) for the root cause.\n"
    )
    assert engine_root_cause(str(log)) == ENGINE_ERROR
    assert engine_root_cause(str(tmp_path / "missing.log")) == ""


def test_an_engine_whose_core_process_is_gone_is_dead(tmp_path):
    import subprocess
    import sys

    from microcoder.actors.engines.async_llm import AsyncEngine

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    engine = AsyncEngine(StandInLLM, extension=False, version=0)
    try:
        assert engine.dead() == ""
        engine.engine_core_pid = child.pid  # reaped: gone
        assert "EngineCore process" in engine.dead() and str(child.pid) in engine.dead()
        engine.engine_core_pid = None
        engine.llm.errored = True  # what vLLM's AsyncLLM says once its core exited
        assert "errored" in engine.dead()
    finally:
        engine.llm = None
        engine.loop.call_soon_threadsafe(engine.loop.stop)
        engine._thread.join(10)
    assert "loop thread is gone" in engine.dead()

"""The supervisor's look at the buffer (launch/run/buffer_watch.py: BufferWatch) and what a dead buffer
does to the run (launch/run/cluster.py: Run.stop_for, raise_if_stopped, checkpoint; the training
loop's wait, launch/run/training_loop.py: waiter). Stand-ins, no Ray: the real death is
tests/launch/test_chaos.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.exceptions import ActorDiedError

from microcoder.buffer.client import BufferTimeout
from microcoder.launch.run.buffer_watch import BufferWatch
from microcoder.launch.run.cluster import BufferDied, Run
from microcoder.launch.run.training_loop import waiter


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def ok() -> None:
    return None


def raises(err: BaseException):
    def ping():
        raise err

    return ping


def test_a_live_buffer_is_not_dead():
    assert BufferWatch(ok, ok, 30.0).check() == ""


def test_a_dead_buffer_actor_is_dead_at_the_first_look():
    why = BufferWatch(raises(ActorDiedError()), ok, 30.0).check()
    assert why.startswith("the buffer actor died")


def test_a_buffer_that_does_not_answer_is_dead_only_after_the_deadline():
    clock = Clock()
    watch = BufferWatch(ok, raises(BufferTimeout("no reply")), 30.0, clock)
    assert watch.check() == "" and watch.failing
    clock.now = 29.0
    assert watch.check() == ""
    clock.now = 31.0
    assert "has not answered for 31 s" in watch.check()


def test_an_answer_resets_the_deadline():
    clock, pings = Clock(), [raises(BufferTimeout("no reply")), ok]
    watch = BufferWatch(ok, lambda: pings[0](), 30.0, clock)
    watch.check()
    pings.pop(0)
    clock.now = 20.0
    assert watch.check() == "" and not watch.failing
    pings.insert(0, raises(BufferTimeout("no reply")))
    clock.now = 45.0
    assert watch.check() == ""  # failing for 0 s, not 45


def stopped_run(tmp_path) -> Run:
    run = Run.__new__(Run)
    run.fatal, run.log_path, run.run_dir = "", tmp_path / "launcher.log", tmp_path
    run.metrics = SimpleNamespace(log=lambda kind, **f: None)
    run.learners = None
    run.stop_for("the buffer actor died (test)")
    return run


def test_a_stopped_run_writes_no_checkpoint(tmp_path):
    run = stopped_run(tmp_path)
    run.client = None  # reached only if checkpoint went on
    with pytest.raises(BufferDied, match="the buffer actor died"):
        run.checkpoint()
    assert not (tmp_path / "checkpoints").exists()


def test_the_learners_wait_ends_at_the_first_look_after_the_buffer_died(tmp_path):
    run = stopped_run(tmp_path)
    with pytest.raises(BufferDied):
        waiter(run)(1.0)


class CountingPool:
    def __init__(self):
        self.checks = 0

    def check(self, before_loop=None) -> list[str]:
        self.checks += 1
        return []

    def stats(self) -> list:
        return []

    def report_errors(self, stats) -> list[str]:
        return []


def supervised_run(tmp_path) -> SimpleNamespace:
    stops = []
    return SimpleNamespace(
        run_dir=tmp_path,
        fatal="",
        cfg=SimpleNamespace(buffer=SimpleNamespace(request_timeout_s=30.0)),
        buffer=None,
        release_client=None,
        generators=CountingPool(),
        executors=CountingPool(),
        prepare_generator=None,
        learners=SimpleNamespace(version=0),
        log=lambda msg: None,
        metrics=SimpleNamespace(log=lambda kind, **f: None),
        stop_for=stops.append,
        stops=stops,
    )


def test_the_supervisor_stops_the_run_when_the_buffer_died_and_restarts_nothing(tmp_path):
    from microcoder.launch.run.supervisor import Supervisor

    run = supervised_run(tmp_path)
    sup = Supervisor(run)
    sup.watch = BufferWatch(raises(ActorDiedError()), ok, 30.0)
    sup.tick()
    assert run.stops and run.stops[0].startswith("the buffer actor died")
    assert run.generators.checks == run.executors.checks == 0


def test_while_the_buffer_does_not_answer_no_replica_is_restarted(tmp_path):
    from microcoder.launch.run.supervisor import Supervisor

    run = supervised_run(tmp_path)
    sup = Supervisor(run)
    sup.watch = BufferWatch(ok, raises(BufferTimeout("no reply")), 30.0, Clock())
    sup.tick()
    assert run.stops == [] and run.generators.checks == 0
    sup.watch.ping_server = ok
    sup.tick()
    assert run.generators.checks == run.executors.checks == 1


def test_the_supervisors_watch_asks_the_runs_own_buffer_server(tmp_path):
    from microcoder import protocol as m
    from microcoder.launch.run.supervisor import Supervisor

    calls = []
    run = supervised_run(tmp_path)
    run.release_client = SimpleNamespace(call=lambda msg, timeout_s: calls.append((msg, timeout_s)))
    Supervisor(run).watch.ping_server()
    assert len(calls) == 1 and isinstance(calls[0][0], m.GetStats) and calls[0][1] <= 30.0


def test_a_dead_buffer_kills_the_learner_ranks_so_no_wait_on_them_outlasts_it(
    tmp_path, monkeypatch
):
    import ray

    killed = []
    monkeypatch.setattr(ray, "kill", lambda handle, no_restart=True: killed.append(handle))
    run = Run.__new__(Run)
    run.fatal, run.log_path, run.run_dir = "", tmp_path / "launcher.log", tmp_path
    run.metrics = SimpleNamespace(log=lambda kind, **f: None)
    run.learners = SimpleNamespace(ranks=["rank-0", "rank-1"])
    run.stop_for("the buffer actor died (test)")
    run.stop_for("said twice")
    assert killed == ["rank-0", "rank-1"] and run.fatal == "the buffer actor died (test)"

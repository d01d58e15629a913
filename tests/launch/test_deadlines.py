"""Actor readiness has a deadline: a replica whose start never ends (neither ready nor failed)
stops `Pool.add` with an error naming it, its log and cluster.ready_timeout_s, and on a live
run (`add(wait=False)`, `check()`) is given up on and killed instead of staying pending for
ever; a replica stuck in a control call (`Pool.call_all`) is named too. Real Ray actors whose
methods sleep stand in for a stuck engine start and a stuck replica."""

from __future__ import annotations

import os
import time

import pytest

from microcoder.actors.deadline import PeerTimeout
from microcoder.launch.run.pools import Pool

STUCK_S = 120.0  # far beyond the deadline: only the deadline can end the wait


class StuckStart:
    """A replica with the pool's protocol whose start never ends."""

    def ready(self) -> bool:
        time.sleep(STUCK_S)
        return True

    def pid(self) -> int:
        return os.getpid()

    def run(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def shutdown(self) -> None:
        return None


class StuckControl(StuckStart):
    """A replica that starts, then hangs in a control call."""

    def ready(self) -> bool:
        return True

    def set_temperature(self, temperature: float) -> None:
        time.sleep(STUCK_S)


def _pool(ray, kind: str, body=StuckStart) -> Pool:
    cls = ray.remote(num_cpus=0, max_concurrency=2)(body)
    return Pool(kind, lambda name: cls.remote(), lambda name: "", lambda msg: None, 1.0)


@pytest.mark.timeout(60)
def test_a_replica_that_never_gets_ready_stops_add_naming_it_its_log_and_the_field(ray_cluster):
    pool = _pool(ray_cluster, "stuck-add")
    try:
        with pytest.raises(PeerTimeout) as info:
            pool.add(1)
    finally:
        pool.shutdown()
    assert str(info.value).startswith(
        "stuck-add-0 (log RUN_DIR/logs/stuck-add-0.log) did not finish starting within 1 s"
    )
    assert str(info.value).endswith("raise cluster.ready_timeout_s")


@pytest.mark.timeout(60)
def test_a_live_replica_stuck_starting_is_given_up_on_named_and_killed(ray_cluster):
    ray = ray_cluster
    pool = _pool(ray, "stuck-live")
    pool.add(1, wait=False)
    pid = ray.get(pool.pending[0].handle.pid.remote(), timeout=30)
    deadline = time.monotonic() + 30
    while not pool.errors and time.monotonic() < deadline:
        pool.check()
        time.sleep(0.1)
    assert pool.pending == [] and len(pool) == 0
    assert pool.errors[0].startswith(
        "stuck-live-0 failed to start within 1 s: it was still not ready (stuck starting"
    )
    assert "raise cluster.ready_timeout_s" in pool.errors[0]
    assert _gone(pid, within_s=30)


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.timeout(60)
def test_a_replica_stuck_in_a_control_call_is_named_with_its_log(ray_cluster):
    pool = _pool(ray_cluster, "stuck-control", StuckControl)
    pool.ready_timeout_s = 60.0  # it starts normally (a process start can take seconds here)
    pool.add(1)
    try:
        with pytest.raises(PeerTimeout) as info:
            pool.call_all("set_temperature", 0.7, timeout_s=1.0)
    finally:
        pool.shutdown()
    assert str(info.value).startswith(
        "stuck-control-0 (log RUN_DIR/logs/stuck-control-0.log) did not finish set_temperature "
        "within 1 s: it is stuck"
    )


class StuckProbe(StuckControl):
    """A generator that starts, then hangs sampling the diversity probe."""

    def probe_diversity(self, prompts: list[str], temperature: float) -> float:
        time.sleep(STUCK_S)
        return 0.0


@pytest.mark.timeout(60)
def test_a_generator_stuck_in_the_temperature_calibration_is_named(ray_cluster, tmp_path):
    from types import SimpleNamespace

    from microcoder.launch.config import Config
    from microcoder.launch.run.temperature_control import build_controller

    cfg = Config()
    cfg.algorithm.temperature.calibrate = True
    cfg.cluster.ready_timeout_s = 1.0
    pool = _pool(ray_cluster, "stuck-probe", StuckProbe)
    pool.ready_timeout_s = 60.0
    pool.add(1)
    run = SimpleNamespace(
        cfg=cfg,
        resume_from=None,
        generators=pool,
        problems=SimpleNamespace(head=lambda n: [("p0", "a prompt")][:n]),  # RunProblems.head
        run_dir=tmp_path,
    )
    try:
        with pytest.raises(PeerTimeout) as info:
            build_controller(run)
    finally:
        pool.shutdown()
    assert str(info.value).startswith(
        "stuck-probe-0 (log RUN_DIR/logs/stuck-probe-0.log) did not finish the diversity probe "
        "at T="
    )
    assert "raise cluster.ready_timeout_s" in str(info.value)

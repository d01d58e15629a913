"""Placement groups live exactly as long as their replica: real Ray groups with CPU-only bundles
(the product makes them on CUDA only; `own_group=True` takes the same path on CPU), released
when a replica leaves its pool and at the end, as Ray's own table shows."""

from __future__ import annotations

import time

import pytest

from microcoder.launch.run.placement import GROUPS, release, release_all, replica_options
from microcoder.launch.run.pools import Pool


def _state(pg) -> str:
    import ray

    return ray.util.placement_group_table(pg)["state"]


def _wait_state(pg, want: str, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while (state := _state(pg)) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return state


def _wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not (met := condition()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return met


def _group(options: dict):
    return options["scheduling_strategy"].placement_group


def _live_groups(prefix: str) -> list[str]:
    """Names of the groups in Ray's table, not removed, whose name starts with mc-<prefix>."""
    import ray

    return sorted(
        g["name"]
        for g in ray.util.placement_group_table().values()
        if g["name"].startswith(f"mc-{prefix}") and g["state"] != "REMOVED"
    )


class Worker:
    """A replica with the pool's protocol: ready, a long `run` until `stop`, stats, shutdown."""

    def __init__(self, fail_ready: bool = False):
        self.fail_ready, self.stopped = fail_ready, False

    def ready(self) -> bool:
        if self.fail_ready:
            raise RuntimeError("this replica never starts")
        return True

    def run(self) -> None:
        while not self.stopped:
            time.sleep(0.02)

    def stop(self) -> None:
        self.stopped = True

    def stats(self) -> dict:
        return {"name": "worker"}

    def shutdown(self) -> None:
        self.stopped = True


@pytest.fixture
def groups(ray_cluster, monkeypatch):
    """Ray up, a short wait for a group's resources (a leak fails fast, not in 600 s), and no
    group left behind by a failing test."""
    monkeypatch.setattr(GROUPS, "ready_timeout_s", 30.0)
    yield ray_cluster
    release_all()


def _pool(ray, kind: str, cpus: float, fail_ready: bool = False) -> Pool:
    cls = ray.remote(max_concurrency=4)(Worker)

    def make(name: str):
        opts = replica_options(cpus, 0, "cpu", name, own_group=True)
        return cls.options(num_cpus=cpus, **opts).remote(fail_ready)

    return Pool(kind, make, release=lambda name: "", log=lambda msg: None)


def test_the_cpu_device_makes_no_group():
    before = GROUPS.names()
    assert replica_options(1.0, 0.0, "cpu", "cpu-only") == {}
    assert GROUPS.names() == before


def test_a_released_group_is_removed_in_rays_table(groups):
    pg = _group(replica_options(0.5, 0, "cpu", "pg-released", own_group=True))
    assert _state(pg) == "CREATED"
    assert release("pg-released") == ["pg-released"]
    assert _wait_state(pg, "REMOVED") == "REMOVED"
    assert "pg-released" not in GROUPS.names()


def test_a_new_group_for_a_name_removes_the_old_one_first(groups):
    old = _group(replica_options(0.5, 0, "cpu", "pg-replaced", own_group=True))
    new = _group(replica_options(0.5, 0, "cpu", "pg-replaced", own_group=True))
    assert _wait_state(old, "REMOVED") == "REMOVED" and _state(new) == "CREATED"
    assert _live_groups("pg-replaced") == ["mc-pg-replaced"]


def test_release_all_removes_every_group(groups):
    pgs = [_group(replica_options(0.5, 0, "cpu", f"pg-all-{i}", own_group=True)) for i in range(3)]
    assert sorted(release_all()) == ["pg-all-0", "pg-all-1", "pg-all-2"]
    assert [_wait_state(pg, "REMOVED") for pg in pgs] == ["REMOVED"] * 3
    assert GROUPS.names() == []


def test_releasing_a_name_without_a_group_does_nothing(groups):
    assert release("executor-never-had-one") == []


def test_scaling_a_pool_down_then_up_reuses_the_freed_resources_and_leaves_no_group(groups):
    # Each replica's group takes 0.45 of the session's CPUs: two fit, a third only once one is
    # gone, so scaling back up waits for (and fails without) the scaled-down replica's release.
    # Sized from the cluster's total: Ray's view of the *available* CPUs lags the removal of
    # the earlier tests' groups (seen: 3 of 6 right after them; once, under load, none, so the
    # "CPU" key was missing), while the raylet that places a group sees them free.
    total = groups.cluster_resources()["CPU"]
    _wait_until(lambda: groups.available_resources().get("CPU", 0.0) >= 0.9 * total, 30.0)
    cpus = round(0.45 * total, 2)
    pool = _pool(groups, "pg-scale", cpus)
    pool.add(2)
    assert _live_groups("pg-scale") == ["mc-pg-scale-0", "mc-pg-scale-1"]
    assert pool.scale_to(1) == ([], ["pg-scale-1"])
    assert _live_groups("pg-scale") == ["mc-pg-scale-0"]
    assert pool.scale_to(2) == (["pg-scale-2"], [])
    deadline = time.monotonic() + 60
    while len(pool) < 2 and time.monotonic() < deadline:
        pool.check()
        time.sleep(0.1)
    assert sorted(pool.replicas) == ["pg-scale-0", "pg-scale-2"]
    pool.shutdown()
    assert _live_groups("pg-scale") == []
    assert [n for n in GROUPS.names() if n.startswith("pg-scale")] == []


def test_a_replica_still_starting_that_is_scaled_away_loses_its_group(groups):
    pool = _pool(groups, "pg-pending", 0.5)
    assert pool.scale_to(1) == (["pg-pending-0"], [])
    assert pool.scale_to(0) == ([], ["pg-pending-0"])
    assert _live_groups("pg-pending") == []


def test_a_replica_given_up_on_loses_its_group(groups):
    pool = _pool(groups, "pg-failed", 0.5, fail_ready=True)
    pool.ready_timeout_s = 0.0  # give up at the first failed start
    pool.add(1, wait=False)
    pg = GROUPS._groups["pg-failed-0"]
    deadline = time.monotonic() + 30
    while not pool.errors and time.monotonic() < deadline:
        pool.check()
        time.sleep(0.1)
    assert pool.errors and "pg-failed-0 failed to start" in pool.errors[0]
    assert _wait_state(pg, "REMOVED") == "REMOVED"

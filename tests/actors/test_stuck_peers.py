"""A stuck peer ends every driver-side wait with an error naming it and the remedy, never a hang.

Real Ray actors whose methods sleep stand in for stuck peers: a plain actor for the deadline
helper (actors/deadline.py: `get_within`), and learner ranks that hang in one call for the
driver's LearnerGroup (rank_cls= swaps the rank's class; the group's own code runs unchanged).
Deadlines are a second or two; a stuck call sleeps far longer, and the group kills it."""

from __future__ import annotations

import os
import time

import pytest

from microcoder.actors.deadline import PeerFailed, PeerTimeout, get_within

STUCK_S = 120.0  # far beyond every deadline here: only the deadline can end the wait


class Sleeper:
    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return "awake"

    def fail(self) -> None:
        raise ValueError("this peer failed")


def _rank_class(ray, stuck_in: str, stuck_rank: int):
    """A learner rank's Ray class whose rank `stuck_rank` never returns from `stuck_in` (one
    method, or several joined by "+")."""

    class StuckRank:
        def __init__(self, rank: int, world: int):
            self.rank = rank

        def _call(self, method: str) -> None:
            if method in stuck_in.split("+") and self.rank == stuck_rank:
                time.sleep(STUCK_S)

        def where(self):
            self._call("where")
            return {"ip": ray.util.get_node_ip_address(), "pid": os.getpid(), "log": None}

        def rendezvous(self):
            return "127.0.0.1", 0

        def setup(self, *args):
            self._call("setup")
            return 0

        def fetch_batch(self, timeout_s):
            self._call("fetch_batch")
            return {
                "n_groups": 1,
                "done": False,
                "groups_ref": None,
                "staleness": [0],
                "batch_reward_mean": 0.0,
                "filtered_groups": 0,
                "diversity": 0.0,
            }

        def train(self, groups=None):
            self._call("train")
            return {"version": 1.0}

        def publish(self):
            self._call("publish")
            return {"gather_s": 0.0}

        def save(self, path):
            return path

        def latest_version(self):
            self._call("latest_version")
            return 0

        def shutdown(self):
            return None

    return ray.remote(num_cpus=0, max_concurrency=4)(StuckRank)


def _cfg(**fields):
    from microcoder.launch.config import load_config

    sets = ["learner.world_size=2", "cluster.device=cpu", "learner.step_timeout_s=1.5"]
    return load_config(None, sets + [f"{k}={v}" for k, v in fields.items()])


@pytest.mark.timeout(60)
def test_a_sleeping_actor_ends_the_wait_naming_it_and_the_remedy(ray_cluster):
    ray = ray_cluster
    peer = ray.remote(num_cpus=0)(Sleeper).remote()
    try:
        with pytest.raises(PeerTimeout) as info:
            get_within(peer.nap.remote(STUCK_S), 1.0, "nap", "sleeper-0", "raise x.nap_s")
    finally:
        ray.kill(peer)
    assert str(info.value) == "sleeper-0 did not finish nap within 1 s: raise x.nap_s"
    assert info.value.peers == ["sleeper-0"]


@pytest.mark.timeout(60)
def test_one_failed_call_ends_the_wait_at_once_naming_the_ones_still_running(ray_cluster):
    ray = ray_cluster
    a, b = (ray.remote(num_cpus=0)(Sleeper).remote() for _ in range(2))
    try:
        with pytest.raises(PeerFailed) as info:  # deadline far away: the failure ends it
            get_within([a.nap.remote(STUCK_S), b.fail.remote()], STUCK_S, "step", ["a", "b"], "")
    finally:
        ray.kill(a)
        ray.kill(b)
    assert str(info.value).startswith("b failed step while a had not finished it")
    assert "ValueError: this peer failed" in str(info.value)
    assert info.value.running == ["a"]


@pytest.mark.timeout(90)
def test_a_rank_stuck_in_train_is_named_with_node_and_pid_and_the_step_deadline(ray_cluster):
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    group = LearnerGroup(_cfg(), "model", "tcp://x", rank_cls=_rank_class(ray, "train", 1))
    pid = ray.get(group.ranks[1].where.remote())["pid"]
    try:
        with pytest.raises(PeerTimeout) as info:
            group.step(timeout_s=None, notice_s=0.2)
    finally:
        group.shutdown()
    assert str(info.value).startswith(
        f"learner rank 1 on 127.0.0.1 pid {pid} did not finish train within 2 s: "
        "raise learner.step_timeout_s"
    )


@pytest.mark.timeout(90)
def test_a_group_with_a_stuck_rank_refuses_to_save_and_its_shutdown_kills_the_ranks(ray_cluster):
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    group = LearnerGroup(_cfg(), "model", "tcp://x", rank_cls=_rank_class(ray, "publish", 0))
    pids = [w["pid"] for w in ray.get([r.where.remote() for r in group.ranks])]
    with pytest.raises(PeerTimeout):
        group.step(timeout_s=None, notice_s=0.2)
    with pytest.raises(RuntimeError, match="the learner group is broken .*learner rank 0"):
        group.save("ckpt")
    group.shutdown()
    assert _gone(pids, within_s=30)  # killed, not left sleeping in their calls


def _gone(pids: list[int], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.timeout(90)
def test_a_rank_stuck_in_setup_is_named_with_the_readiness_deadline(ray_cluster):
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    cls = _rank_class(ray, "setup", 1)
    with pytest.raises(PeerTimeout) as info:  # long enough for the ranks' processes to start
        LearnerGroup(_cfg(**{"cluster.ready_timeout_s": 10}), "model", "tcp://x", rank_cls=cls)
    message = str(info.value)
    assert message.startswith("learner rank 1 on 127.0.0.1 pid ")
    assert (
        "did not finish setup (loading the model, joining the process group) within 10 s" in message
    )
    assert "raise cluster.ready_timeout_s" in message


@pytest.mark.timeout(90)
def test_a_rank_0_that_never_returns_a_batch_is_named_once_the_batch_deadline_passed(ray_cluster):
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    cfg = _cfg(**{"buffer.request_timeout_s": 0.5})
    group = LearnerGroup(cfg, "model", "tcp://x", rank_cls=_rank_class(ray, "fetch_batch", 0))
    notices = []
    try:
        with pytest.raises(PeerTimeout) as info:
            group.step(timeout_s=1.0, on_wait=notices.append, notice_s=0.5)
    finally:
        group.shutdown()
    assert str(info.value).startswith("learner rank 0 on 127.0.0.1 pid ")
    assert "did not return a batch" in str(info.value)
    assert "learner.batch_wait_s = 1 s: it is stuck" in str(info.value)
    assert notices  # the periodic notice went on while it waited


class StuckLearner0:
    """Learner rank 0 as a generator sees it, answering no weight call."""

    def latest_version(self) -> int:
        time.sleep(STUCK_S)
        return 1


@pytest.mark.timeout(60)
def test_a_generator_pull_from_a_stuck_learner_rank_0_names_it_and_the_sync_deadline(
    ray_cluster,
):
    from microcoder.actors.weights.pull import pull_weights
    from microcoder.learner.config import LearnerConfig

    ray = ray_cluster
    learner0 = ray.remote(num_cpus=0)(StuckLearner0).remote()
    try:
        with pytest.raises(PeerTimeout) as info:
            pull_weights(None, learner0, 0, "generator-0", LearnerConfig(sync_timeout_s=1), {})
    finally:
        ray.kill(learner0)
    assert str(info.value).startswith(
        "learner rank 0 (log RUN_DIR/logs/learner-0.log) did not finish latest_version within 1 s"
    )
    assert "raise learner.sync_timeout_s" in str(info.value)


@pytest.mark.timeout(90)
def test_a_rank_0_that_stops_answering_while_it_waits_without_a_limit_is_named(ray_cluster):
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    cls = _rank_class(ray, "fetch_batch+latest_version", 0)  # waiting, and answering nothing
    group = LearnerGroup(_cfg(**{"learner.sync_timeout_s": 1}), "model", "tcp://x", rank_cls=cls)
    try:
        with pytest.raises(PeerTimeout) as info:  # no batch limit: only the check can end it
            group.step(timeout_s=None, notice_s=0.2)
    finally:
        group.shutdown()
    assert str(info.value).startswith("learner rank 0 on 127.0.0.1 pid ")
    assert "did not finish latest_version (asked while it waits for a batch) within 1 s" in str(
        info.value
    )


@pytest.mark.timeout(60)
def test_learner_rank_0_is_found_by_its_name_as_generators_look_it_up(ray_cluster):
    """Generators get rank 0's name, not its handle (no handle among a restartable actor's
    constructor arguments): the name finds the group's rank 0."""
    from microcoder.actors.deadline import actor_by_name
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    group = LearnerGroup(_cfg(), "model", "tcp://x", rank_cls=_rank_class(ray, "", 0))
    try:
        found = actor_by_name(group.rank0_name, 5.0, "learner rank 0", "")
        assert ray.get(found.where.remote())["pid"] == ray.get(group.rank0.where.remote())["pid"]
        assert ray.get(found.where.remote())["pid"] != ray.get(group.ranks[1].where.remote())["pid"]
    finally:
        group.shutdown()


@pytest.mark.timeout(60)
def test_a_peer_not_found_by_name_ends_the_look_up_naming_it_and_the_remedy(ray_cluster):
    from microcoder.actors.deadline import actor_by_name

    t0 = time.monotonic()
    with pytest.raises(PeerTimeout) as info:
        actor_by_name("mc-learner-0-absent", 1.0, "learner rank 0", "see its log")
    assert 1.0 <= time.monotonic() - t0 < 10.0
    assert str(info.value) == (
        "learner rank 0 (Ray actor 'mc-learner-0-absent') was not found within 1 s: see its log"
    )
    assert info.value.peers == ["learner rank 0"]

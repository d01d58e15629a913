"""The learner group on Ray with two FSDP2 ranks (gloo): rank 0 pulls the batch from the real
buffer and broadcasts it over the ranks' process group (the driver passes nothing), both ranks
train on it, rank 0 publishes the new version to the buffer. Rank 0's fetch with a scripted
buffer: the one dynamic filter and the statistics it returns. And, on a
LearnerRank with stand-ins for the learner and the publisher (no Ray): weight sends never run
during a step (from a train to the end of its publish)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from buffer_testing import ScriptedBuffer, put_scored_groups, start_buffer_host

from microcoder.actors.learner_rank import LearnerRank
from microcoder.learner.config import LearnerConfig

SETTLE_S = 0.5  # how long a send that must stay blocked is given to (wrongly) run


class BlockingLearner:
    """Stand-in Learner: train_step waits for `release`; each event goes to `log`."""

    def __init__(self, log: list):
        self.log, self.version = log, 0
        self.entered, self.release = threading.Event(), threading.Event()
        self.fail = False

    def train_step(self, groups):
        self.log.append("train")
        self.entered.set()
        self.release.wait()
        if self.fail:
            raise RuntimeError("train failed")
        self.version += 1
        self.log.append("trained")
        return {"version": float(self.version)}

    def published_state(self):
        return {"w": self.version}

    def save_checkpoint(self, path):
        self.log.append("save")
        return path


class RecordingPublisher:
    def __init__(self, log: list, from_device: bool = True):
        self.log, self.version, self.sent = log, -1, threading.Event()
        self.from_device = from_device  # an NCCL channel on the learner's GPU; False: gloo

    def sends_from_device(self, name):
        return self.from_device

    def publish(self, version, state):
        self.log.append(f"publish {version}")
        self.version = version

    def send(self, name, ticket=None, port=None, exclusive=None):
        if exclusive is None:
            return self._send()
        with exclusive() as waited:  # rank 0's WorkLock, for a channel on the device
            return {**self._send(), "lock_wait_s": waited}

    def _send(self):
        self.log.append(f"send {self.version}")
        self.sent.set()
        return {"version": self.version, "bytes": 0, "send_s": 0.0}


def stand_in_rank(
    sync_timeout_s: float = 60.0, from_device: bool = True
) -> tuple[LearnerRank, list]:
    log: list = []
    rank = LearnerRank(0, 1)
    rank.settings = SimpleNamespace(learner=LearnerConfig(sync_timeout_s=sync_timeout_s))
    rank.learner, rank.publisher = BlockingLearner(log), RecordingPublisher(log, from_device)
    rank.client = SimpleNamespace(announce_version=lambda v: None)
    return rank, log


def in_thread(fn, *args) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run():
        try:
            out["value"] = fn(*args)
        except Exception as err:  # the test inspects it
            out["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_send_requested_during_a_train_waits_for_the_step_and_sends_its_version():
    rank, log = stand_in_rank()
    train, _ = in_thread(rank.train, [])
    assert rank.learner.entered.wait(10)
    send, sent = in_thread(rank.send_weights, "gen-0")
    assert not rank.publisher.sent.wait(SETTLE_S)  # not during the train ...
    rank.learner.release.set()
    train.join(10)
    assert log == ["train", "trained"]
    assert not rank.publisher.sent.wait(SETTLE_S)  # ... nor between the train and its publish
    rank.publish()
    send.join(10)
    assert log == ["train", "trained", "publish 1", "send 1"]
    assert sent["value"]["version"] == 1 and sent["value"]["lock_wait_s"] > 0


def test_a_gloo_send_of_the_cpu_copy_goes_during_a_train_without_waiting_for_the_step():
    rank, log = stand_in_rank(from_device=False)
    train, _ = in_thread(rank.train, [])
    assert rank.learner.entered.wait(10)
    reply = rank.send_weights("gen-0")  # returns while the train still runs
    assert log == ["train", "send -1"] and reply["lock_wait_s"] == 0.0
    rank.learner.release.set()
    train.join(10)


def test_only_a_channel_built_on_a_gpu_counts_as_sending_from_the_device():
    from microcoder.actors.weights.publisher import WeightPublisher

    publisher = WeightPublisher(timeout_s=1.0)
    for name, device in (("cpu-gen", "cpu"), ("gpu-gen", "cuda")):
        publisher._channels[name] = SimpleNamespace(
            thread=None, sender=SimpleNamespace(device=SimpleNamespace(type=device))
        )
    assert not publisher.sends_from_device("cpu-gen")
    assert publisher.sends_from_device("gpu-gen")
    assert not publisher.sends_from_device("never-opened")


def test_learner_calls_between_a_train_and_its_publish_do_not_wait_for_each_other():
    rank, log = stand_in_rank()
    rank.learner.release.set()
    rank.train([])
    calls, _ = in_thread(lambda: (rank.get_version(), rank.save("ckpt"), rank.publish()))
    calls.join(10)
    assert not calls.is_alive() and log == ["train", "trained", "save", "publish 1"]


def test_a_failed_train_leaves_no_step_open_for_sends():
    rank, log = stand_in_rank()
    rank.learner.fail = True
    rank.learner.release.set()
    with pytest.raises(RuntimeError, match="train failed"):
        rank.train([])
    assert rank.send_weights("gen-0")["version"] == -1 and log == ["train", "send -1"]


def test_a_send_that_waits_longer_than_the_sync_timeout_fails_naming_the_setting():
    rank, log = stand_in_rank(sync_timeout_s=0.2)
    train, _ = in_thread(rank.train, [])
    assert rank.learner.entered.wait(10)
    with pytest.raises(TimeoutError, match="learner.sync_timeout_s"):
        rank.send_weights("gen-0")
    rank.learner.release.set()
    train.join(10)
    assert "send -1" not in log


@pytest.fixture(scope="module")
def two_ranks(ray_cluster, actor_cfg, actor_prompts):
    """A buffer host and a two-rank LearnerGroup on it: (ray, cfg, buffer address, group)."""
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    cfg = actor_cfg.model_copy(deep=True)
    cfg.learner.world_size = 2
    host, address = start_buffer_host(ray, cfg, actor_prompts)
    group = LearnerGroup(cfg, cfg.model.path, address)
    try:
        yield ray, cfg, address, group
    finally:
        group.shutdown()
        ray.get(host.shutdown.remote())


@pytest.mark.slow
def test_two_rank_learner_group_steps_and_announces_the_version(two_ranks):
    from microcoder.buffer.client import BufferClient

    ray, cfg, address, group = two_ranks
    start = group.version
    assert len(group.ranks) == 2
    put_scored_groups(address, cfg.learner.batch_size, cfg.algorithm.group_size)
    res = group.step(timeout_s=120)
    assert res.version == start + 1 and group.version == start + 1 and not res.skipped
    m = res.metrics
    assert m["groups"] == cfg.learner.batch_size and m["loss"] == m["loss"]  # not NaN
    with BufferClient(address, owner="peek") as c:
        assert c.stats()["version"] == start + 1
    assert ray.get(group.rank0.latest_version.remote()) == start + 1


class RecordedRank:
    """An actor handle that records each call's arguments before making it."""

    def __init__(self, handle, calls: list):
        self._handle, self._calls = handle, calls

    def __getattr__(self, name: str):
        method, calls = getattr(self._handle, name), self._calls

        class Method:
            def remote(self, *args, **kwargs):
                calls.append((name, args, kwargs))
                return method.remote(*args, **kwargs)

        return Method()


def expected_digest(put: dict, group_ids: list[int]) -> dict:
    """learner/intake.py's `digest` of the groups put, in the given order, as every rank should
    have received them."""
    import hashlib

    groups = [put[g] for g in group_ids]
    tokens = [a for g in groups for r in g.responses for a in (g.prompt_ids, r.response_ids)]
    logprobs = [r.logprobs for g in groups for r in g.responses]
    return {
        "group_ids": group_ids,
        "tokens": hashlib.sha256(np.concatenate(tokens).astype(np.int32).tobytes()).hexdigest(),
        "logprobs": hashlib.sha256(
            np.concatenate(logprobs).astype(np.float32).tobytes()
        ).hexdigest(),
        "sequences": sum(len(g.responses) for g in groups),
    }


@pytest.mark.slow
def test_every_rank_trains_on_the_batch_the_buffer_handed_out_with_no_driver_in_between(two_ranks):
    ray, cfg, address, group = two_ranks
    put = put_scored_groups(address, cfg.learner.batch_size, cfg.algorithm.group_size, seed=1)
    calls, handles = [], group.ranks
    group.ranks = [RecordedRank(r, calls) for r in handles]
    try:
        res = group.step(timeout_s=120)
    finally:
        group.ranks = handles
    assert [c for c in calls if c[0] == "train"] == [("train", (), {})] * 2  # no batch, no ref
    assert all(
        not isinstance(v, ray.ObjectRef) for _, args, kw in calls for v in (*args, *kw.values())
    )
    digests = ray.get([r.batch_digest.remote() for r in group.ranks])
    assert sorted(digests[0]["group_ids"]) == sorted(put)
    assert digests == [expected_digest(put, digests[0]["group_ids"])] * 2
    assert res.metrics["groups"] == len(put) and res.filtered_groups == 0
    assert res.reward_mean == 0.5


def fetch_settings(**rollouts):
    """What rank 0's fetch reads of its settings (rollouts off unless given)."""
    learner = LearnerConfig(batch_size=2, max_filtered_batches=4)
    return SimpleNamespace(
        learner=learner, **({"rollouts_every": 0, "rollouts_max": 64} | rollouts)
    )


def scored(group_id: int, rewards: list[float], version: int = 0):
    from microcoder.protocol import Group, GroupScores, Response, Score, ScoredGroup

    responses = [
        Response(
            np.arange(1, 4, dtype=np.int32), np.full(3, -1.0, np.float32), policy_version=version
        )
        for _ in rewards
    ]
    group = Group(group_id, "p", prompt_ids=np.arange(1, 3, dtype=np.int32), responses=responses)
    return ScoredGroup(group, GroupScores(group_id, [Score(r, "WA") for r in rewards]))


def test_rank_0_filters_once_while_fetching_and_returns_only_statistics():
    from microcoder.protocol import LearnerBatch

    rank = LearnerRank(0, 1)
    rank.settings = fetch_settings()
    rank.learner, rank.dynamic_filtering = SimpleNamespace(version=3), True
    rank.client = ScriptedBuffer(
        [
            LearnerBatch([scored(1, [1.0, 1.0]), scored(2, [0.0, 1.0], 2)], 3, [3, 1], False),
            LearnerBatch([scored(3, [0.0, 1.0], 1)], 3, [2], False),
        ]
    )
    out = rank.fetch_batch(timeout_s=10)
    assert set(out) == {"n_groups", "done", "wait_s", "metrics"} and out["n_groups"] == 2
    assert rank.client.filtered == [1]
    assert rank._batch.group_ids.tolist() == [2, 3]  # kept on rank 0 for the broadcast
    m = out["metrics"]
    assert m["filtered_groups"] == 1 and m["reward_mean"] == 4 / 6  # over every fetched group
    assert (m["staleness_mean"], m["staleness_max"]) == (1.5, 2)  # over the trained groups


def test_rank_0_drops_a_response_with_a_nan_log_prob_and_names_its_generator(caplog):
    """The non-finite guard at the fetch: the response leaves its group before the filter, the
    step's `nonfinite_dropped` counts it, the log names its generator; a group left with no
    response is reported like a filtered one (admission control gets its capacity back)."""
    import dataclasses
    import logging

    from microcoder.protocol import LearnerBatch

    def poisoned(sg, which):
        responses = list(sg.group.responses)
        for i in which:
            lp = responses[i].logprobs.copy()
            lp[1] = np.nan
            responses[i] = dataclasses.replace(responses[i], logprobs=lp)
        group = dataclasses.replace(sg.group, responses=responses, generator="generator-1")
        return dataclasses.replace(sg, group=group)

    rank = LearnerRank(0, 1)
    rank.settings = fetch_settings()
    rank.learner, rank.dynamic_filtering = SimpleNamespace(version=3), True
    three = poisoned(scored(1, [0.0, 1.0, 0.0]), [2])  # keeps its signal without response 2
    gone = poisoned(scored(2, [0.0, 1.0]), [0, 1])
    rank.client = ScriptedBuffer(
        [
            LearnerBatch([three, gone], 3, [0, 0], False),
            LearnerBatch([scored(3, [0.0, 1.0])], 3, [0], False),
        ]
    )
    with caplog.at_level(logging.WARNING):
        out = rank.fetch_batch(timeout_s=10)
    assert out["metrics"]["nonfinite_dropped"] == 3
    assert rank._batch.group_ids.tolist() == [1, 3] and len(rank._batch) == 4
    assert bool(rank._batch.behaviour_logprobs.isfinite().all())
    assert rank.client.filtered == [2]
    assert "group 1 response 2 (generator generator-1, policy version 0)" in caplog.text


def test_rank_0_has_a_thread_for_each_generators_send_and_its_groups_name_real_methods():
    from microcoder.actors.learner_rank import (
        CONCURRENCY_GROUPS,
        LEARNER_THREADS,
        MIN_WEIGHT_GENERATORS,
        group_sizes,
    )

    for methods in CONCURRENCY_GROUPS.values():
        assert all(callable(getattr(LearnerRank, m, None)) for m in methods), methods
    grouped = [m for methods in CONCURRENCY_GROUPS.values() for m in methods]
    assert len(grouped) == len(set(grouped))
    assert not {"train", "publish", "save", "get_version"} & set(grouped)  # the default group
    assert LEARNER_THREADS >= 2  # a learner call and a shutdown beside it
    for generators in (1, 8, MIN_WEIGHT_GENERATORS, 64):
        sizes = group_sizes(generators)
        assert sizes.keys() == CONCURRENCY_GROUPS.keys()
        assert sizes["weights"] >= 2 * generators  # a live and an abandoned send each
        assert sizes["data"] >= 1 and sizes["control"] >= 2
    assert group_sizes(1)["weights"] == 2 * MIN_WEIGHT_GENERATORS  # room to scale up


def test_sends_run_together_and_a_learner_call_waits_for_the_ones_running():
    """NCCL weight sends share WorkLock with each other (each channel has its own peers: one
    slow receiver must not hold another generator's sync) and exclude learner calls."""
    from microcoder.actors.weights.work_lock import WorkLock

    lock, inside, log = WorkLock(), threading.Barrier(2, timeout=10), []

    def send(name):
        with lock.send(10.0, name):
            inside.wait()  # both sends are in at once, or this times out
            log.append(f"{name} in")
            time.sleep(0.3)
            log.append(f"{name} out")

    sends = [in_thread(send, f"gen-{i}")[0] for i in range(2)]
    time.sleep(0.1)

    def train():
        with lock.learner(opens_step=True):
            log.append("train")

    t, _ = in_thread(train)
    for thread in [*sends, t]:
        thread.join(10)
    assert log[-1] == "train" and sorted(log[:4]) == sorted(
        ["gen-0 in", "gen-1 in", "gen-0 out", "gen-1 out"]
    ), log


def test_sends_that_waited_through_a_step_go_before_the_next_train_and_later_ones_after_it():
    from microcoder.actors.weights.work_lock import WorkLock

    lock, log = WorkLock(), []

    def send(name):
        with lock.send(10.0, name):
            log.append(name)
            time.sleep(0.2)

    def learner_call(what, **kw):
        with lock.learner(**kw):
            log.append(what)
            time.sleep(0.2)

    learner_call("train 1", opens_step=True)
    early, _ = in_thread(send, "early send")  # waits for the step to close
    time.sleep(0.2)
    learner_call("publish 1", closes_step=True)
    train, _ = in_thread(lambda: learner_call("train 2", opens_step=True))  # after early send
    time.sleep(0.05)
    late, _ = in_thread(send, "late send")  # asked after train 2: waits for its step
    time.sleep(0.3)
    learner_call("publish 2", closes_step=True)
    for thread in (early, train, late):
        thread.join(10)
    assert log == ["train 1", "publish 1", "early send", "train 2", "publish 2", "late send"], log

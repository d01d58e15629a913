"""The generator's engine pauses only once learner rank 0 is ready to send (issue 33, fault 3):
rank 0 may wait for `WorkLock` through a whole train and publish before an NCCL send, and the
engine must keep generating meanwhile, paused for the transfer alone.

Real Ray: rank 0 is the product's LearnerRank in a Ray actor, with its real `WorkLock` and
`WeightPublisher` over a real gloo channel; only its Learner is a stand-in whose train sleeps
TRAIN_S. The device-channel path is forced on CPU (tests/support/rank0_stand_in.py:
`GlooAsDevice`), so every send waits for the lock as over NCCL. The generator side is the
product's `Generator.maybe_update`, called as the streaming loop's ticks call it (request; the
ticks go on until rank 0 is ready; then pause, receive, relabel, resume); its vLLM
engine is a stand-in that records when it was paused and receives on a real WeightReceiver.
With the old order (pause, then ask rank 0 to send, in one blocking tick) the engine was paused
through the whole train and publish: see notes/issue-33-h18.md."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from engine_testing.stand_in import ReceivingEngine
from rank0_stand_in import StandInLearner, rank0_actor_cls

TRAIN_S = 3.0
DEADLINE_S = 20.0


class PauseRecordingEngine(ReceivingEngine):
    """What the Generator's weight update uses of an AsyncEngine; `pauses`: (start, end)."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses: list[list[float]] = []
        self.version = None

    def pause(self, mode: str, clear_cache: bool = True) -> None:
        self.pauses.append([time.monotonic(), None])

    def resume(self) -> None:
        self.pauses[-1][1] = time.monotonic()

    def set_version(self, v: int) -> None:
        self.version = v

    def reset_prefix_cache(self) -> bool:
        return True


def rank0_actor(ray, sync_timeout_s: float = DEADLINE_S):
    """Rank 0: the product's LearnerRank with a stand-in Learner whose train sleeps TRAIN_S,
    sending as over NCCL (tests/support/rank0_stand_in.py)."""
    learner = StandInLearner(train_s=TRAIN_S)
    return rank0_actor_cls(ray, generators=1).remote(learner, sync_timeout_s, DEADLINE_S)


def stand_in_generator(rank0):
    """The product's Generator with only what its weight update reads."""
    from microcoder.actors.generator import Generator
    from microcoder.actors.timing import PoolTimer
    from microcoder.actors.weights.follower import WeightFollower
    from microcoder.learner.config import LearnerConfig

    gen = Generator.__new__(Generator)
    gen.name, gen.version = "gen-0", -1
    gen.engine, gen.learner0 = PauseRecordingEngine(), "rank-0"
    gen.settings = SimpleNamespace(
        learner=LearnerConfig(sync_timeout_s=DEADLINE_S),
        generator=SimpleNamespace(
            weight_update="inflight", inflight_kv="recompute", weight_poll_s=0.5
        ),
    )
    gen.timer, gen.pause_s, gen.syncs = PoolTimer(), [], []
    gen.weights = WeightFollower(gen, "rank-0")  # learner.weight_transport = "channels"
    gen.weights.rank0_handle = rank0
    return gen


@pytest.mark.timeout(180)
def test_the_engine_keeps_generating_while_rank_0_trains_and_pauses_only_for_the_transfer(
    ray_cluster,
):
    ray = ray_cluster
    rank0 = rank0_actor(ray)
    try:
        assert ray.get(rank0.stand_in_setup.remote(), timeout=60) == 0
        gen = stand_in_generator(rank0)
        gen.maybe_sync_weights()  # the first sync (version 0): opens the channel
        assert gen.version == 0 and len(gen.engine.pauses) == 1
        step: dict = {}

        def driver() -> None:  # the learner's step: train, then publish (both hold the lock)
            step["t0"] = time.monotonic()
            ray.get(rank0.train.remote([]), timeout=60)
            ray.get(rank0.publish.remote(), timeout=60)
            step["t1"] = time.monotonic()

        thread = threading.Thread(target=driver, daemon=True)
        thread.start()
        time.sleep(0.5)  # the train holds the lock
        t_ask = time.monotonic()
        # version 0 is published and newer than -1: ask as a generator whose label lags, from
        # the loop's ticks (actors/generate_loop.py calls maybe_update every 50 ms with work in flight)
        gen.version, ticks = -1, []
        while gen.version < 1 and time.monotonic() < t_ask + DEADLINE_S:
            t0 = time.monotonic()
            updated = gen.maybe_update()
            ticks.append((time.monotonic() - t0, updated))
            time.sleep(0.05)
        thread.join(60)
    finally:
        ray.kill(rank0)
    start, end = gen.engine.pauses[-1]
    assert t_ask < step["t0"] + TRAIN_S  # the generator asked while the train ran ...
    assert start >= step["t0"] + TRAIN_S, (start - t_ask, step)  # ... and paused after it
    assert end - start < TRAIN_S / 2  # the transfer alone
    waiting = [s for s, updated in ticks if not updated]
    assert len(waiting) > 10 and max(waiting) < 1.0  # the loop ticked on while rank 0 trained
    assert gen.version == 1 and gen.engine.version == 1  # the step's version, after the lock
    print(
        f"asked {t_ask - step['t0']:.2f} s into the step; {len(waiting)} ticks waited, the "
        f"longest {max(waiting):.3f} s; paused {end - start:.3f} s"
    )


@pytest.mark.timeout(180)
def test_a_send_that_fails_before_rank_0_is_ready_fails_the_tick_at_once_without_a_pause(
    ray_cluster,
):
    """Rank 0's send gives up on `WorkLock` after its sync_timeout_s (1 s) during a 3 s train:
    the generator's next tick raises rank 0's own error then, not at its own later deadline,
    the engine was never paused for it, and the channel is marked closed (the next try reopens)."""
    ray = ray_cluster
    rank0 = rank0_actor(ray, sync_timeout_s=1.0)
    try:
        assert ray.get(rank0.stand_in_setup.remote(), timeout=60) == 0
        gen = stand_in_generator(rank0)
        gen.maybe_sync_weights()  # opens the channel
        train = rank0.train.remote([])
        time.sleep(0.5)  # the train holds the lock
        gen.version, t_ask = -1, time.monotonic()
        with pytest.raises(Exception) as info:
            while time.monotonic() < t_ask + DEADLINE_S:
                assert not gen.maybe_update()
                time.sleep(0.05)
        failed_after = time.monotonic() - t_ask
        ray.get(train, timeout=60)
    finally:
        ray.kill(rank0)
    assert "raise learner.sync_timeout_s above the longest step" in str(info.value)
    assert failed_after < 3.0, failed_after  # rank 0's 1 s, not the generator's 1 s + 5 s
    assert len(gen.engine.pauses) == 1  # the first sync's only
    assert gen.weights.source.pending is None and not gen.weights.source.channel["open"]

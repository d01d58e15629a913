"""Learner rank 0 as the weight-sync tests drive it: the product's LearnerRank (its real
`WorkLock`, `publish` and `send_weights`) with a stand-in Learner, and its WeightPublisher forced
onto the device path on CPU (`GlooAsDevice`), so that every send waits for the lock as over NCCL.
Used by tests/actors (test_rank0_groups, test_pause_after_ready, test_sync_receivers) and
tests/launch/test_generator_restart_sync.py, in this process or in a Ray actor.

Ray pickles a class by its module's name, and a Ray worker's sys.path has the repository root
but not tests/support: so this module asks Ray's cloudpickle to send its classes by value
(`register_pickle_by_value`), as it sends a class defined inside a test function."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

from ray import cloudpickle

from microcoder.actors.learner_rank import LearnerRank, group_sizes
from microcoder.actors.weights.publisher import WeightPublisher
from microcoder.learner.config import LearnerConfig

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class GlooAsDevice(WeightPublisher):
    """Takes its gloo channels for channels that send from the device (as NCCL's do), so every
    send takes `WorkLock`."""

    def sends_from_device(self, name: str) -> bool:
        super().sends_from_device(name)  # waits for the channel's build, as over NCCL
        return True


class StandInLearner:
    """What rank 0's train and publish read of a Learner: a train sleeps `train_s` and bumps the
    version; the weights are `state` or else one tensor "w" of `numel` floats equal to the
    version; `entered`: when each train began (monotonic)."""

    def __init__(self, train_s: float = 0.0, numel: int = 4096, state: dict | None = None):
        self.version, self.entered = 0, []
        self.train_s, self.numel, self.state = train_s, numel, state

    def train_step(self, groups) -> dict:
        self.entered.append(time.monotonic())
        time.sleep(self.train_s)
        self.version += 1
        return {}

    def published_state(self) -> dict:
        import torch

        if self.state is not None:
            return dict(self.state)
        return {"w": torch.full((self.numel,), float(self.version))}


class StandInRank0(LearnerRank):
    """Rank 0 of a one-rank group over `learner`: `stand_in_setup()` instead of `setup` (no
    process group, no buffer: versions are announced to nobody). `sync_timeout_s` is the
    learner.sync_timeout_s its sends wait for `WorkLock`; the publisher's own deadline is
    `publisher_timeout_s` (default the same)."""

    def __init__(self, learner, sync_timeout_s: float, publisher_timeout_s: float | None = None):
        super().__init__(0, 1)
        self._stand_in = learner, sync_timeout_s, publisher_timeout_s or sync_timeout_s

    def stand_in_setup(self) -> int:
        learner, sync_timeout_s, publisher_timeout_s = self._stand_in
        self.settings = SimpleNamespace(learner=LearnerConfig(sync_timeout_s=sync_timeout_s))
        self.learner, self.client = learner, SimpleNamespace(announce_version=lambda v: None)
        self.publisher = GlooAsDevice(publisher_timeout_s, host="127.0.0.1")
        self.publish()
        return self.learner.version


def rank0_actor_cls(ray, generators: int):
    """StandInRank0 as a Ray actor class. It carries the concurrency groups (`group_sizes`):
    actors/remote.py `learner_rank_cls` tags LearnerRank's own methods with them, so once that
    class was built in this process (test_rank0_groups on the same xdist worker) Ray refuses a
    subclass without them."""
    groups = group_sizes(generators)
    return ray.remote(num_cpus=0, max_concurrency=8, concurrency_groups=groups)(StandInRank0)

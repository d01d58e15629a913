"""`ChannelSource`: the generator's own channel with learner rank 0 as a `WeightSource`
(source.py). Asks rank 0 to send (actors/weights/pull.py `request_weights`), keeps the
`PendingSync` while rank 0 is not ready (over NCCL it first finishes the learner's step), and
hands the send out as a `Round` once it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from microcoder.actors.weights.pull import request_weights
from microcoder.actors.weights.source import Round


class ChannelSource:
    def __init__(self, name: str, cfg, rank0: Callable[[], Any]):
        self.name = name
        self.cfg = cfg
        self.rank0 = rank0
        self.channel: dict[str, Any] = {}
        """The channel's spec and state, as actors/weights/pull.py keeps it."""
        self.pending = None
        """A send asked of learner rank 0 that it is not yet ready to make (`PendingSync`): the
        loop's ticks check it, the engine generating meanwhile."""

    def next_round(self, engine, version: int, block: bool) -> Round | None:
        if self.pending is None:  # ask rank 0 to send; the engine keeps generating meanwhile
            self.pending = request_weights(
                engine, self.rank0(), version, self.name, self.cfg, self.channel
            )
            if self.pending is None:
                return None
        pending = self.pending
        try:  # over NCCL rank 0 is ready only after the learner's step: pause only then
            if block:
                pending.wait_ready()
            elif not pending.ready():
                return None
        except BaseException:
            self.pending = None  # failed: the channel is marked closed, the next try reopens
            raise
        self.pending = None
        return Round(pending.receive, str(pending.latest))

    def under_way(self) -> bool:
        return self.pending is not None

    def owes_a_round(self) -> bool:
        return False

    def summary(self) -> dict[str, Any]:
        return {}

    def leave(self, rank0) -> None:
        pass

"""`RelaySource`: the weight relay as a `WeightSource` (source.py), for
learner.weight_transport = "relay". Its `RelayMember` (relay_member.py) says each tick whether
a relay round is ready, under way, or whether the generator's own channel is to sync now (not
joined yet, fallen behind, a round failed): then the round comes from the `ChannelSource`,
and once loaded the member joins the relay at that version."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from microcoder.actors.weights.channel_source import ChannelSource
from microcoder.actors.weights.relay_member import CHANNEL, RECEIVE, WAIT
from microcoder.actors.weights.source import Round


class RelaySource:
    def __init__(self, member, channel: ChannelSource, rank0: Callable[[], Any]):
        self.member = member
        self.channel = channel
        self.rank0 = rank0

    def next_round(self, engine, version: int, block: bool) -> Round | None:
        if not self.channel.under_way():  # a send asked on the channel is finished there first
            while True:
                way = self.member.step(engine, self.rank0(), version)
                if way == CHANNEL:
                    break
                if way == RECEIVE:
                    what = f"{self.member.waiting['version']} (relay)"
                    return Round(lambda: self.member.receive(engine), what)
                if way != WAIT or not block:
                    return None
                time.sleep(0.02)
        round_ = self.channel.next_round(engine, version, block)
        if round_ is not None:  # current on its channel: join the relay
            round_.loaded = lambda engine, version: self.member.joined_after_channel_sync(
                engine, self.rank0(), version
            )
        return round_

    def under_way(self) -> bool:
        return self.channel.under_way() or self.member.busy

    def owes_a_round(self) -> bool:
        return self.member.busy

    def summary(self) -> dict[str, Any]:
        return self.member.summary()

    def leave(self, rank0) -> None:
        self.member.leave(rank0)  # out of the next epoch, answered

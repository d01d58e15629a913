"""The one interface between a generator's `WeightFollower` (follower.py) and the transports:
a `WeightSource` hands out `Round`s, and the follower loads them, never knowing whether a round
came by the generator's own channel (`ChannelSource`, channel_source.py) or by the relay
(`RelaySource`, relay_source.py). LoRA adapters come by the channel too (the worker writes
them as an adapter folder).

`weight_source` picks the source `learner.weight_transport` names: "channels" (the default) or
"relay" (which falls back to the channel when it cannot serve a round). Under `learner.lora`
the config allows only channels (learner/config.py: an adapter is a few MB, and the relay's
chain carries whole models)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from microcoder.actors.weights.relay_member import RelayMember


@dataclass
class Round:
    """One set of weights ready to load. `receive()` pulls it into the engine's workers (inside
    the follower's pause: actors/weights/publisher.py `update_engine`) and returns the loaded
    version's result, or None when nothing newer came; `what` names the round in errors;
    `loaded(engine, version)` runs once the engine serves the round's weights."""

    receive: Callable[[], Any]
    what: str
    loaded: Callable[[Any, int], None] | None = None


class WeightSource(Protocol):
    """Where a generator's new weights come from (learner rank 0, by some transport)."""

    def next_round(self, engine, version: int, block: bool) -> Round | None:
        """A round newer than `version` that is ready to load now, else None (asked of rank 0
        meanwhile where needed; the next call checks again). `block`: wait for a round under
        way instead (within the transport's own deadlines)."""

    def under_way(self) -> bool:
        """A round was asked for or announced and is not loaded yet: the loop leases nothing
        and calls `next_round` at every tick."""

    def owes_a_round(self) -> bool:
        """Others wait on this generator receiving a round (a relay chain it is in): it must be
        received before the engine samples outside the loop."""

    def summary(self) -> dict[str, Any]:
        """The transport's stats, for the generator's `stats()` (empty when it keeps none)."""

    def leave(self, rank0) -> None:
        """The generator shuts down: tell rank 0 (its handle) it is gone, where the transport
        keeps state there."""


def weight_source(name: str, settings, rank0: Callable[[], Any]) -> WeightSource:
    """Generator `name`'s source for `settings.learner.weight_transport`; `rank0()` is learner
    rank 0's actor handle (looked up on first use)."""
    from microcoder.actors.weights.channel_source import ChannelSource

    channel = ChannelSource(name, settings.learner, rank0)
    if settings.learner.weight_transport != "relay":
        return channel
    from microcoder.actors.weights.relay_source import RelaySource

    member = RelayMember(name, settings.learner, settings.generator.weight_poll_s)
    return RelaySource(member, channel, rank0)

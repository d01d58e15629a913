"""The generator's side of the weight relay (actors/relay_member.py), its decisions at a tick
against a stand-in for learner rank 0's `relay_status` (no Ray): when it syncs on its own
channel, when it waits, and when a round rank 0 did not confirm makes its weights mixed."""

from __future__ import annotations

import pytest

from microcoder.actors.relay_member import CHANNEL, IDLE, RelayMember
from microcoder.actors.weight_sync import WeightsMixedError
from microcoder.learner.config import LearnerConfig


class Rank0:
    """`relay_status.remote(name)` answers `status` (the member's `_ask` takes it as is)."""

    def __init__(self, status: dict) -> None:
        self.status = status
        self.relay_status = self
        self.asked = 0

    def remote(self, name: str) -> dict:
        self.asked += 1
        return self.status


class Member(RelayMember):
    def _ask(self, ref, what: str):
        return ref


def member() -> Member:
    m = Member("gen-0", LearnerConfig(sync_timeout_s=5, relay_join_s=1), poll_s=0.0)
    m.asked = True  # joined after a channel sync
    return m


def status(member: str, latest: int, last: dict | None = None, boundary: int = -1) -> dict:
    return {
        "member": member,
        "epoch": None,
        "round": None,
        "last": last or {},
        "latest": latest,
        "boundary": boundary if boundary >= 0 else latest,
    }


def test_a_member_joined_after_the_boundary_takes_the_version_it_lacks_on_its_channel():
    """It asked to join just after rank 0's boundary for version 4 (so it is pending until
    version 5's): version 4 comes over its channel now, and it stays asked (no fallback)."""
    m = member()
    assert m.step(None, Rank0(status("pending", latest=4)), version=3) == CHANNEL
    assert m.asked and m.fallbacks == 0
    assert m.step(None, Rank0(status("pending", latest=4)), version=4) == IDLE


def test_a_pending_member_waits_for_the_boundary_about_to_include_it():
    """Version 4 is published and rank 0's hub has not made its boundary yet (the last was
    version 3's): that boundary takes the member in, so it waits instead of syncing version 4
    on its channel (a channel sync then would keep it from joining the new epoch, and the
    epoch would not form for anyone)."""
    m = member()
    assert m.step(None, Rank0(status("pending", latest=4, boundary=3)), version=3) == IDLE
    assert m.asked and m.fallbacks == 0


def test_a_member_rank_0_counts_out_falls_back_to_its_channel():
    m = member()
    assert m.step(None, Rank0(status("out", latest=4)), version=4) == CHANNEL
    assert not m.asked and m.fallbacks == 1 and "does not count it" in m.last_fallback
    rank0 = Rank0(status("in", latest=5))
    assert m.step(None, rank0, version=4) == CHANNEL and rank0.asked == 0  # until it rejoins


def test_a_round_rank_0_did_not_confirm_for_it_makes_its_weights_mixed():
    """It loaded round 3 of epoch 2, and rank 0's outcome of that round names it as not
    delivered (other bytes): its next poll raises WeightsMixedError and it falls back."""
    m = member()
    m.checking = (2, 3)
    last = {"epoch": 2, "n": 3, "delivered": ["gen-1"], "failed": {"gen-0": "received other bytes"}}
    with pytest.raises(WeightsMixedError, match="received other bytes"):
        m.step(None, Rank0(status("in", latest=5, last=last)), version=5)
    assert not m.asked and m.checking is None


def test_a_confirmed_round_clears_the_check():
    m = member()
    m.checking = (2, 3)
    last = {"epoch": 2, "n": 3, "delivered": ["gen-0"], "failed": {}}
    assert m.step(None, Rank0(status("in", latest=5, last=last)), version=5) == IDLE
    assert m.checking is None and m.asked


class ReadiedMember:
    """A member a tick readied for a round (rank 0 put it in the chain): `step` says receive."""

    busy = True

    def __init__(self, events: list) -> None:
        self.events = events
        self.waiting = {"version": 7}

    def step(self, engine, rank0, version: int) -> str:
        return "receive"

    def receive(self, engine) -> dict:
        self.events.append("received")
        self.busy, self.waiting = False, None
        return {"version": 7}


def test_eval_sampling_receives_a_round_its_generator_was_ready_for_before_it_samples():
    """A tick readied the generator for a relay round; `greedy` (as `sample_eval` and the
    diversity probe) takes the weight lock next. It receives the round first (the chain waits
    for it), then samples on version 7. Before: it sampled, and the round was never received."""
    import threading
    from types import SimpleNamespace

    from microcoder.actors.generator import Generator
    from microcoder.actors.timing import PoolTimer

    events: list[str] = []

    class Engine:
        version = None

        def pause(self, mode, clear_cache=True):
            pass

        def resume(self):
            pass

        def set_version(self, v):
            self.version = v

        def reset_prefix_cache(self):
            return True

        def generate(self, prompts, params):
            events.append(f"sampled at {self.version}")
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1])]) for _ in prompts]

    gen = Generator.__new__(Generator)
    gen.name, gen.version, gen._pending, gen._held, gen._mixed = "gen-0", 6, None, None, False
    gen.engine, gen._learner0_handle, gen.learner0 = Engine(), object(), "rank-0"
    gen.settings = SimpleNamespace(
        generator=SimpleNamespace(weight_update="inflight", inflight_kv="recompute")
    )
    gen.timer, gen.pause_s, gen.syncs, gen._weights = PoolTimer(), [], [], threading.Lock()
    gen._prompt_cache = {"p": [1, 2]}
    gen._relay = ReadiedMember(events)
    assert gen.greedy(["p"], 4) == [[1]]
    assert events == ["received", "sampled at 7"] and gen.version == 7

"""The generator's side of the weight relay (actors/weights/relay_member.py), its decisions at a tick
against a stand-in for learner rank 0's `relay_status` (no Ray): when it syncs on its own
channel, when it waits, and when a round rank 0 did not confirm makes its weights mixed."""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import timedelta
from types import SimpleNamespace

import pytest
import torch.distributed as dist

from microcoder.actors.weights.publisher import WeightsMixedError
from microcoder.actors.weights.relay_member import (
    CHANNEL,
    IDLE,
    WAIT,
    RelayMember,
    backoff_versions,
)
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
    from types import SimpleNamespace

    from microcoder.actors.generator import Generator
    from microcoder.actors.timing import PoolTimer
    from microcoder.actors.weights.channel_source import ChannelSource
    from microcoder.actors.weights.follower import WeightFollower
    from microcoder.actors.weights.relay_source import RelaySource

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
    gen.name, gen.version = "gen-0", 6
    gen.engine, gen.learner0 = Engine(), "rank-0"
    gen.settings = SimpleNamespace(
        generator=SimpleNamespace(weight_update="inflight", inflight_kv="recompute")
    )
    gen.timer, gen.pause_s, gen.syncs = PoolTimer(), [], []
    gen._prompt_cache = {"p": [1, 2]}
    rank0 = object()
    source = RelaySource(
        ReadiedMember(events), ChannelSource("gen-0", None, lambda: rank0), lambda: rank0
    )
    gen.weights = WeightFollower(gen, "rank-0", source)
    gen.weights.rank0_handle = rank0
    assert gen.greedy(["p"], 4) == [[1]]
    assert events == ["received", "sampled at 7"] and gen.version == 7


class Rank0Joins(Rank0):
    """Also takes `join_relay.remote(name, workers)` (the member's `_ask` takes it as is)."""

    def __init__(self, status: dict) -> None:
        super().__init__(status)
        self.joins = 0
        self.join_relay = SimpleNamespace(remote=self._join)

    def _join(self, name: str, workers: int) -> dict:
        self.joins += 1
        return {}


class OneWorker:
    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        assert method == "mc_relay_worker"
        return [0]


def test_a_member_that_falls_back_again_and_again_sits_out_more_versions_each_time(capsys):
    """Each fallback in a row (no relay round loaded between) from the second on makes the
    member sit out more versions on its own channel before it joins again: 1, 2, 4, 8, 16,
    then 16 (capped); the decision is logged once, at the fallback, and the channel syncs it
    sits out ask rank 0 nothing and log nothing."""
    m, rank0 = member(), Rank0Joins(status("out", latest=0))
    version, waits = 10, []
    for _ in range(7):
        assert m.asked
        assert m.step(None, rank0, version=version) == CHANNEL  # rank 0 dropped it: falls back
        first = m.rejoin_at
        waits.append(first - version - 1)
        capsys.readouterr()
        while True:  # channel syncs, one version each, until it joins again
            version += 1
            joins = rank0.joins
            m.joined_after_channel_sync(OneWorker(), rank0, version)
            if rank0.joins > joins:
                break
        assert version == first and m.asked
        assert capsys.readouterr().err == ""  # nothing logged while it sat versions out
    assert waits == [0, 1, 2, 4, 8, 16, 16]
    assert [backoff_versions(k) for k in range(1, 8)] == waits
    assert m.in_row == 7 and m.fallbacks == 7


def test_a_relay_round_loaded_ends_the_run_of_fallbacks(capsys):
    """A member that fell back three times in a row, then loaded a relay round: its next
    fallback is its first in a row again (it rejoins after the next channel sync), and the
    fallback that decided a backoff logged it once."""
    m, rank0 = member(), Rank0Joins(status("out", latest=0))
    for v in (10, 11, 13):
        m.asked = True
        m.step(None, rank0, version=v)
    err = capsys.readouterr().err
    assert err.count("sits out") == 2 and "fell back 3 times in a row: sits out 2 version(s)" in err
    with epoch_store() as spec:
        m.asked, m.epoch, m.spec = True, spec["epoch"], spec
        m.waiting = {"n": 4, "version": 20, "first": 1, "since": 0.0}
        loaded = m.receive(Loads(20))
        assert loaded["version"] == 20 and m.in_row == 0
        assert m.step(None, rank0, version=20) == CHANNEL
        assert m.in_row == 1 and m.rejoin_at == 21


class Loads:
    """An engine whose one worker loads relay round n as version `version`."""

    def __init__(self, version: int) -> None:
        self.version = version

    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        assert method == "mc_relay_receive_and_load"
        return [(self.version, 3, 0.01, 0.01)]


@contextmanager
def epoch_store():
    """An epoch's store, as rank 0's sender hosts it: its spec for member gen-0 (rank 1)."""
    from microcoder.learner.distributed import free_port

    port = free_port("127.0.0.1")
    master = dist.TCPStore(
        "127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30)
    )
    spec = {"epoch": 3, "host": "127.0.0.1", "port": port, "first_rank": 1, "workers": 1}
    try:
        yield {**spec, "master": master}
    finally:
        del master


def test_a_member_asks_rank_0_at_once_when_rank_0_announces_a_round():
    """A member of epoch 3 that has round 0 polls rank 0 only every 60 s; rank 0's hub starts
    round 1 and announces it in the epoch's store (relay_hub.py `ANNOUNCE_KEY`): the member's
    watcher sees it, the member counts as busy (its loop ticks it at once), and its next step
    asks `relay_status` and sets its ready key for round 1, long before its next poll."""
    from microcoder.actors.weights.relay_hub import _tell
    from microcoder.learner.sync.transport import KEY_PREFIX

    with epoch_store() as spec:
        master = spec.pop("master")
        m = Member("gen-0", LearnerConfig(sync_timeout_s=5, relay_join_s=1), poll_s=60.0)
        m.asked, m.epoch = True, 3
        st = {**status("in", latest=5), "epoch": spec, "round": {"n": 0, "version": 5}}
        rank0 = Rank0(st)
        assert m.step(None, rank0, version=5) == IDLE and rank0.asked == 1
        assert m.step(None, rank0, version=5) == IDLE and rank0.asked == 1  # throttled
        assert not m.busy
        rank0.status = {**st, "latest": 6, "round": {"n": 1, "version": 6}}
        _tell(SimpleNamespace(store=master), 1, 6)
        deadline = time.monotonic() + 5
        while not m.busy:
            assert time.monotonic() < deadline, "the member's watcher did not see round 1"
            time.sleep(0.01)
        assert m.step(None, rank0, version=5) == WAIT and rank0.asked == 2
        assert master.check([f"{KEY_PREFIX}/relay-ready/1/1"]) and m.waiting["n"] == 1
        m.fall_back("test over")

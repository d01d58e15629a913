"""The data source's name travels with the group: buffer lease (PromptAssignment.source) ->
the generator's Group -> codec meta -> the learner's ScoredGroup; the buffer refuses a group
whose source is not its slot's, and a snapshot keeps the slots' sources."""

from __future__ import annotations

from dataclasses import replace

import pytest

from microcoder.buffer.client import BufferClient
from microcoder.buffer.codec import group_frames, read_group
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.prompts import ListPromptTable, MixturePrompts
from microcoder.buffer.records import MessageError
from microcoder.buffer.server import BufferServer
from microcoder.buffer.snapshot import export_state, import_state
from microcoder.buffer.state import BufferState
from microcoder.buffer.wire import pack, unpack


def mixture() -> MixturePrompts:
    table = ListPromptTable(
        {"alpha": [(f"a{i}", "solve a") for i in range(6)], "beta": [("b0", "solve b")]}
    )
    return MixturePrompts(table, [0.5, 0.5], seed=3)


def test_the_codec_carries_the_source_and_checks_its_type(make_group):
    group = replace(make_group(1, "a1", versions=(0, 0)), source="alpha")
    assert read_group(*group_frames(group)).source == "alpha"
    meta, text, tensors = group_frames(group)
    old = unpack(meta)
    del old["source"]  # a producer from before the field
    assert read_group(pack(old), text, tensors).source == ""
    old["source"] = 3
    with pytest.raises(MessageError, match="Group.source"):
        read_group(pack(old), text, tensors)


def test_sources_travel_from_the_lease_to_the_learner(make_group, make_scores):
    server = BufferServer(BufferConfig(long_poll_s=0.2, max_staleness=1), mixture(), 8)
    addr = server.start()
    try:
        with (
            BufferClient(addr, "gen", timeout_s=5) as gen,
            BufferClient(addr, "ex", timeout_s=5) as ex,
            BufferClient(addr, "learner", timeout_s=5) as learner,
        ):
            leased = gen.get_prompts(8).assignments
            assert {a.source for a in leased} == {"alpha", "beta"}
            for a in leased:
                assert a.problem_id[0] == a.source[0]
            # a generator copies the source (actors/generate_loop.py); one that lies is refused
            liar = replace(make_group(leased[0].group_id, leased[0].problem_id), source="gamma")
            assert "is from source" in gen.put_unscored([liar]).rejected[0]
            groups = [
                replace(make_group(a.group_id, a.problem_id), source=a.source) for a in leased
            ]
            assert len(gen.put_unscored(groups).accepted) == 8
            assert {g.source for g in ex.get_unscored(8)} == {"alpha", "beta"}
            ex.put_scored([make_scores(g) for g in groups])
            batch = learner.get_batch(8, version=0, timeout_s=5)
        by_id = {a.group_id: a.source for a in leased}
        assert [sg.group.source for sg in batch.groups] == [
            by_id[sg.group.group_id] for sg in batch.groups
        ]
    finally:
        server.stop()


def test_a_snapshot_keeps_each_slots_source():
    state = BufferState(mixture(), batch_size=4, max_staleness=1)
    leased = state.get_prompts("gen", 4, now=0.0)
    data = unpack(pack(export_state(state)))
    fresh = BufferState(mixture(), batch_size=4, max_staleness=1)
    import_state(fresh, data)
    # the leases were returned: the prompts come out again, with their sources
    again = fresh.get_prompts("gen2", 4, now=0.0)
    assert sorted((a.problem_id, a.source) for a in again) == sorted(
        (a.problem_id, a.source) for a in leased
    )

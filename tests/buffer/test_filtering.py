"""Dynamic filtering vs admission control: filtered groups stay consumed but give capacity back."""

from __future__ import annotations

import threading

import pytest

from microcoder import protocol as m
from microcoder.buffer.client import BufferClient, BufferError, BufferTimeout
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer
from microcoder.buffer.state import BufferState


@pytest.fixture
def server():
    srv = BufferServer(
        BufferConfig(max_staleness=0, long_poll_s=0.2), DatasetPrompts(["p"] * 50), batch_size=2
    )
    srv.start()
    yield srv
    srv.stop()


def delivered_state(make_group, make_scores, n: int = 2) -> tuple[BufferState, list[int]]:
    """A state (k = 0, batch 2) whose learner just consumed `n` groups at version 0."""
    state = BufferState(DatasetPrompts(["p"] * 10), batch_size=2, max_staleness=0)
    ids = []
    for a in state.get_prompts("g", n, 0.0):
        group = make_group(a.group_id, a.problem_id)
        assert state.put_unscored("g", group, b"G", 0.0) == "accepted"
        state.get_unscored("e", 1, 0.0)
        assert state.put_scored("e", make_scores(group), b"S", 0.0) == "accepted"
        ids.append(a.group_id)
    delivered, _ = state.get_batch(n, 0)
    assert [d.group_id for d in delivered] == ids
    return state, ids


def test_filtered_groups_give_admission_capacity_back(make_group, make_scores):
    state, ids = delivered_state(make_group, make_scores)
    assert state.capacity() == 0  # (0 + 1 + 0) * 2 - 2 trained
    state.report_filtered(ids)
    assert state.capacity() == 2


def test_filtered_groups_stay_consumed_and_accounting_is_exact(make_group, make_scores):
    state, ids = delivered_state(make_group, make_scores)
    state.report_filtered(ids)
    c = state.counters
    assert (c.consumed, c.filtered) == (2, 2) and state.violations() == []


def test_a_filter_report_counts_each_delivered_id_once(make_group, make_scores):
    state, ids = delivered_state(make_group, make_scores)
    assert state.report_filtered([ids[0], ids[0], 999]) == 1
    assert state.report_filtered([ids[0]]) == 0
    assert (state.counters.filtered, state.counters.filtered_ignored) == (1, 3)


def test_weak_model_with_every_group_filtered_never_deadlocks(server, make_group, make_scores):
    """k = 0, batch 2, version never moves (nothing is trained): with filtered groups counted as
    trained, prompts stop after 2 groups; reported, the road stays open for 20 groups."""
    addr, got = server.address, []

    def dapo_learner() -> None:  # drops every group (all rewards 0) and asks for more
        with BufferClient(addr, "learner", timeout_s=5) as learner:
            while len(got) < 20:
                batch = learner.get_batch(2, version=0, timeout_s=5)
                got.extend(sg.group.group_id for sg in batch.groups)
                learner.report_filtered(sg.group.group_id for sg in batch.groups)

    thread = threading.Thread(target=dapo_learner, daemon=True)
    thread.start()
    with BufferClient(addr, "gen", timeout_s=5) as gen, BufferClient(addr, "ex", timeout_s=5) as ex:
        for _ in range(10):
            prompts = gen.get_prompts(2, wait_s=3).assignments
            assert len(prompts) == 2, "admission control starved the generator"
            gen.put_unscored([make_group(a.group_id, a.problem_id) for a in prompts])
            ex.put_scored([make_scores(g, reward=0.0) for g in ex.get_unscored(2)])
        thread.join(10)
        stats = gen.stats()
    assert len(got) == 20 and stats["consumed"] == 20 and stats["invariant_ok"]
    assert stats["filtered"] == 18  # the last 2 travel with the learner's next get_batch


def test_report_travels_with_the_next_get_batch(server, make_group, make_scores):
    addr = server.address
    with BufferClient(addr, "gen", timeout_s=5) as gen, BufferClient(addr, "ex", timeout_s=5) as ex:
        prompts = gen.get_prompts(2).assignments
        gen.put_unscored([make_group(a.group_id, a.problem_id) for a in prompts])
        ex.put_scored([make_scores(g) for g in ex.get_unscored(2)])
    with BufferClient(addr, "learner", timeout_s=5) as learner:
        ids = [sg.group.group_id for sg in learner.get_batch(2, 0, timeout_s=5).groups]
        learner.report_filtered(ids)
        assert learner.stats()["filtered"] == 0
        with pytest.raises(BufferTimeout):
            learner.get_batch(1, 0, timeout_s=0.3)  # nothing left: times out, report delivered
        stats = learner.stats()
    assert (stats["filtered"], stats["trained"], stats["admission_capacity"]) == (2, 0, 2)


def test_filter_report_of_non_ids_is_a_bad_field_error(server):
    with BufferClient(server.address, "learner", timeout_s=5) as learner:
        with pytest.raises(BufferError) as err:
            learner.call(m.GetBatch("learner", 1, 0, 0.0, ["seven"]))
    assert err.value.code == "bad_field"

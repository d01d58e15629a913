"""The KV floor of actors/generate_loop.py `sample_group` (issue 33), on the bench's simulated engine
(no vLLM): a group submitted at version 0 whose every token is labelled 1 is tagged 0 when the
engine's prefix-cache salt changed while it was in flight (an update that kept the KV: its
prompt blocks may be the old weights'), and 1 when the salt stayed (the update cleared the
cache). tests/actors/test_kv_floor_engine.py shows the leak itself on the real engine."""

from __future__ import annotations

import time

import pytest

from microcoder.actors.generate_loop import _InFlight, _submit
from microcoder.bench.pipeline.sim_engine import SimEngine, SimParams
from microcoder.protocol import PromptAssignment


def _two_groups_through_an_update(salt_after: str) -> list[tuple[int, int]]:
    """Two groups submitted at version 0 under salt "w0" on a serial engine; while the first
    is sampled, the engine is labelled 1 with salt `salt_after` ("w1": the update kept the KV;
    "w0": it cleared the cache). The second starts after it: all its tokens labelled 1.
    Returns each group's (policy_version, last_policy_version), the same for its responses."""
    engine = SimEngine(per_group_s=0.4)
    engine.cache_salt = "w0"
    version = {"now": 0}
    flight = _InFlight()
    assignments = [PromptAssignment(group_id=i, problem_id="p", prompt="p") for i in (1, 2)]
    try:
        _submit(
            engine,
            flight,
            assignments,
            lambda a: SimParams(n=2),
            lambda prompt: [5, 6, 7],
            lambda: version["now"],
            "gen-0",
        )
        time.sleep(0.15)  # the first group holds the engine, the second waits behind it
        engine.set_version(1)
        engine.cache_salt, version["now"] = salt_after, 1
        groups = {a.group_id: f.result(timeout=10) for a, f in _take_all(flight)}
    finally:
        engine.shutdown()
    out = []
    for gid in (1, 2):
        tags = {(r.policy_version, r.last_policy_version) for r in groups[gid].responses}
        assert len(tags) == 1
        out.append(tags.pop())
    return out


def _take_all(flight: _InFlight) -> list:
    done, deadline = [], time.monotonic() + 10
    while flight.futures and time.monotonic() < deadline:
        done += flight.take(0.1)
    assert not flight.futures, "the simulated engine did not finish both groups in 10 s"
    return done


def test_a_group_first_sampled_after_an_update_that_kept_the_kv_has_its_submission_version():
    split, after = _two_groups_through_an_update(salt_after="w1")
    assert split == (0, 1)  # sampled by both versions: the first span, as before
    assert after == (0, 1)  # every token labelled 1, but its prompt blocks may be version 0's


def test_after_an_update_that_cleared_the_cache_the_group_keeps_its_first_span():
    split, after = _two_groups_through_an_update(salt_after="w0")
    assert split == (0, 1)
    assert after == (1, 1)  # no old block to read: all the new version's


@pytest.mark.parametrize("salt_after", ["w0", "w1"])
def test_without_an_update_in_flight_the_salt_changes_nothing(salt_after):
    """A group submitted after the update (at version 1, under the new salt) is version 1."""
    engine = SimEngine(per_group_s=0.05)
    engine.set_version(1)
    engine.cache_salt = salt_after
    flight = _InFlight()
    a = PromptAssignment(group_id=3, problem_id="p", prompt="p")
    try:
        _submit(engine, flight, [a], lambda a: SimParams(n=2), lambda p: [5], lambda: 1, "gen-0")
        ((_, future),) = _take_all(flight)
        group = future.result(timeout=10)
    finally:
        engine.shutdown()
    assert {(r.policy_version, r.last_policy_version) for r in group.responses} == {(1, 1)}

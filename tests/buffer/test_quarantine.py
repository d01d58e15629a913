"""Bad data never livelocks the buffer: a prompt that failed twice is quarantined, not re-leased."""

from __future__ import annotations

from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.snapshot import export_state, import_state
from microcoder.buffer.state import HOLDER_DIED, BufferState


def state_of(ids: list[str], **kw) -> BufferState:
    return BufferState(
        DatasetPrompts(ids, epochs=0, shuffle=False), batch_size=2, max_staleness=4, **kw
    )


def fail_bad_twice(state: BufferState) -> None:
    """Sources in order bad, good, bad, ...: "bad" fails its wave twice; "good" stays leased."""
    for owner in ("g", "h", "g"):
        (a,) = state.get_prompts(owner, 1, 0.0)
        if a.problem_id == "bad":
            assert state.fail_group(owner, a.group_id, "wave raised ValueError") == "accepted"


def test_a_prompt_whose_wave_failed_twice_is_never_handed_out_again():
    state = state_of(["bad", "good"])
    fail_bad_twice(state)
    assert list(state.quarantine.reasons) == ["bad"]
    handed = [a.problem_id for _ in range(5) for a in state.get_prompts("h", 2, 0.0)]
    assert handed and "bad" not in handed


def test_one_failure_does_not_quarantine():
    state = state_of(["p", "q"])
    (a, _b) = state.get_prompts("g", 2, 0.0)
    state.fail_group("g", a.group_id, "transient")
    assert not state.quarantine.reasons


def test_a_prompt_held_by_a_generator_that_died_twice_is_quarantined():
    state = state_of(["killer"])
    for _ in range(2):
        assert [a.problem_id for a in state.get_prompts("g", 1, 0.0)] == ["killer"]
        state.release("g", HOLDER_DIED)
    assert state.quarantine.reasons == {"killer": "its generator died"}
    assert state.get_prompts("g", 1, 0.0) == []


def test_a_clean_release_never_counts_towards_quarantine():
    state = state_of(["p"])
    for _ in range(5):
        assert [a.problem_id for a in state.get_prompts("g", 1, 0.0)] == ["p"]
        state.release("g")  # scale-down or shutdown, not a death
    assert not state.quarantine.reasons and not state.quarantine.failures


def test_when_every_prompt_is_quarantined_the_source_ends_instead_of_spinning():
    state = state_of(["a", "b"], quarantine_after=1)
    for a in state.get_prompts("g", 2, 0.0):
        state.fail_group("g", a.group_id, "bad")
    assert state.get_prompts("g", 4, 0.0) == []
    assert state.prompts_done


def test_quarantine_off_keeps_handing_the_prompt_out():
    state = state_of(["p"], quarantine_after=0)
    for _ in range(4):
        (a,) = state.get_prompts("g", 1, 0.0)
        state.fail_group("g", a.group_id, "bad")
    assert not state.quarantine.reasons


def test_accounting_stays_exact_through_quarantine():
    state = state_of(["bad", "ok1", "ok2"])
    for _ in range(3):
        for a in state.get_prompts("g", 3, 0.0):
            state.release("g", HOLDER_DIED) if a.problem_id == "bad" else None
        state.release("g")
    assert state.violations() == []
    c = state.counters
    assert c.issued == c.consumed + c.dropped_stale + c.failed + sum(state.depths().values())


def test_quarantine_survives_a_snapshot_and_restore():
    state = state_of(["bad", "good"])
    fail_bad_twice(state)
    data = export_state(state)
    restored = state_of(["bad", "good"])
    import_state(restored, data)
    assert "bad" in restored.quarantine.reasons
    assert all(a.problem_id != "bad" for a in restored.get_prompts("g", 4, 0.0))

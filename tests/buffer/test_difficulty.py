"""Online difficulty (issue 45): problems always solved are retired, ones never solved sit out an
epoch, and both survive a snapshot (the buffer's part of `--resume`)."""

from __future__ import annotations

from microcoder.buffer.codec import check_scores, scores_frame
from microcoder.buffer.difficulty import DifficultyTracker, scores_counts
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.snapshot import export_state, import_state, load_snapshot, save_snapshot
from microcoder.buffer.state import BufferState
from microcoder.buffer.wire import unpack
from microcoder.protocol import GroupScores, Score
from tests.buffer.conftest import build_group

AC, WA = ["AC"] * 4, ["WA"] * 4
MIXED = ["AC", "WA", "AC", "WA"]


def state_of(ids: list[str], **kw) -> BufferState:
    """Capacity far above what a test hands out, so nothing needs to be trained on."""
    return BufferState(
        DatasetPrompts(ids, epochs=0, shuffle=False), batch_size=64, max_staleness=64, **kw
    )


def score(state: BufferState, gid: int, pid: str, verdicts: list[str]) -> None:
    """Generate and judge one leased prompt; the scores go through the server's codec check."""
    group = build_group(gid, pid, versions=(0,) * len(verdicts))
    assert state.put_unscored("g", group, b"G", 0.0) == "accepted"
    [(got, _)] = state.get_unscored("e", 1, 0.0)
    assert got == gid
    scores = GroupScores(gid, [Score(1.0 if v == "AC" else 0.0, v, 1, 1) for v in verdicts], "e")
    frame = scores_frame(scores)
    assert state.put_scored("e", check_scores(unpack(frame)), frame, 0.0) == "accepted"


def round_of(state: BufferState, n: int, verdicts: dict[str, list[str]]) -> list[tuple[str, int]]:
    """Hand out up to `n` prompts and score each with its problem's verdicts (default MIXED);
    returns (problem id, epoch) of each hand-out."""
    out = state.get_prompts("g", n, 0.0)
    for a in out:
        score(state, a.group_id, a.problem_id, verdicts.get(a.problem_id, MIXED))
    return [(a.problem_id, a.epoch) for a in out]


def test_a_problem_solved_by_its_last_k_groups_is_retired_and_counted():
    state = state_of(["easy", "hard"], retire_solved_after=2)
    for _ in range(2):
        assert [p for p, _ in round_of(state, 2, {"easy": AC})] == ["easy", "hard"]
    assert list(state.difficulty.retired) == ["easy"]
    later = [p for _ in range(4) for p, _ in round_of(state, 2, {"easy": AC})]
    assert later and set(later) == {"hard"}
    assert state.stats(0.0)["retired"] == 1
    assert state.violations() == []


def test_no_retirement_while_one_of_the_last_k_groups_failed():
    state = state_of(["p"], retire_solved_after=2)
    for verdicts in (AC, MIXED, AC):  # last two: MIXED, AC
        assert round_of(state, 1, {"p": verdicts})[0][0] == "p"
    assert not state.difficulty.retired
    assert round_of(state, 1, {"p": AC})[0][0] == "p"  # last two now AC, AC
    assert list(state.difficulty.retired) == ["p"]
    assert state.get_prompts("g", 1, 0.0) == []


def test_one_wrong_answer_in_a_group_is_not_all_correct():
    state = state_of(["p", "q"], retire_solved_after=1)
    round_of(state, 2, {"p": ["AC", "AC", "AC", "WA"], "q": AC})
    assert list(state.difficulty.retired) == ["q"]


def test_an_unsolved_problem_sits_out_the_next_epoch_and_comes_back_after_it():
    state = state_of(["hopeless", "ok"], skip_unsolved_after=2)
    verdicts = {"hopeless": WA}
    assert round_of(state, 2, verdicts) == [("hopeless", 0), ("ok", 0)]
    assert round_of(state, 2, verdicts) == [("hopeless", 1), ("ok", 1)]  # second all-wrong: marked
    assert round_of(state, 1, verdicts) == [("ok", 2)]  # epoch 2: it sits out
    assert state.stats(0.0)["deferred"] == 1
    assert round_of(state, 1, verdicts) == [("hopeless", 3)]  # back in epoch 3
    # its history is kept: one more all-wrong group defers it again
    assert round_of(state, 3, verdicts) == [("ok", 3), ("ok", 4), ("hopeless", 5)]
    assert state.stats(0.0)["deferred"] == 2
    assert not state.difficulty.retired


def test_a_solved_group_ends_the_unsolved_run():
    state = state_of(["p", "q"], skip_unsolved_after=2)
    for verdicts in (WA, MIXED, WA):
        round_of(state, 2, {"p": verdicts, "q": MIXED})
    assert round_of(state, 2, {}) == [("p", 3), ("q", 3)]
    assert state.stats(0.0)["deferred"] == 0


def test_sandbox_faults_do_not_count_as_wrong():
    state = state_of(["p", "q"], skip_unsolved_after=1, retire_solved_after=1)
    round_of(state, 2, {"p": ["SE"] * 4, "q": ["SE", "AC", "SE", "AC"]})
    assert state.difficulty.pass_rates("p") == []  # nothing judged: nothing recorded
    assert list(state.difficulty.retired) == ["q"]  # the judged responses all passed


def test_when_every_problem_is_deferred_the_scan_moves_on_to_the_next_epoch():
    state = state_of(["a", "b"], skip_unsolved_after=1)
    round_of(state, 2, {"a": WA, "b": WA})
    assert round_of(state, 2, {"a": WA, "b": WA}) == [("a", 2), ("b", 2)]
    assert state.stats(0.0)["deferred"] == 2


def test_both_off_hands_out_the_source_order_and_records_nothing():
    ids = ["a", "b", "c"]
    state = BufferState(DatasetPrompts(ids, epochs=0, seed=3), batch_size=64, max_staleness=64)
    ref = DatasetPrompts(ids, epochs=0, seed=3)
    got = [x for _ in range(4) for x in round_of(state, 3, {"a": AC, "b": WA})]
    want = [(i.problem_id, i.epoch) for i in (ref.next() for _ in range(12))]
    assert got == want
    assert not state.difficulty.on and state.difficulty.rates == {}
    assert state.stats(0.0)["retired"] == state.stats(0.0)["deferred"] == 0


def test_when_every_problem_is_retired_the_source_is_done_without_spinning(caplog):
    state = state_of(["a", "b"], retire_solved_after=1)
    round_of(state, 2, {"a": AC, "b": AC})
    with caplog.at_level("WARNING", logger="microcoder.buffer"):
        assert state.get_prompts("g", 8, 0.0) == []
        assert state.get_prompts("g", 8, 0.0) == []
    assert state.prompts_done and state.source_done
    said = [r for r in caplog.records if "every one of the 2 prompts" in r.getMessage()]
    assert len(said) == 1  # said once


def _marked_state() -> BufferState:
    """ "easy" retired, "hopeless" deferred (marked in epoch 1), "mid" neither."""
    state = state_of(["easy", "hopeless", "mid"], retire_solved_after=2, skip_unsolved_after=2)
    for _ in range(2):
        round_of(state, 3, {"easy": AC, "hopeless": WA})
    assert list(state.difficulty.retired) == ["easy"]
    assert list(state.difficulty.deferred) == ["hopeless"]
    return state


def _continue(state: BufferState) -> list[tuple[str, int]]:
    return [x for _ in range(3) for x in round_of(state, 2, {"hopeless": MIXED})]


def test_retired_and_deferred_survive_export_and_import():
    state = _marked_state()
    data = export_state(state)
    restored = state_of(["easy", "hopeless", "mid"], retire_solved_after=2, skip_unsolved_after=2)
    import_state(restored, data)
    assert restored.stats(0.0)["retired"] == 1
    assert restored.difficulty.pass_rates("hopeless") == [0.0, 0.0]
    expected = _continue(state)
    assert _continue(restored) == expected
    assert ("hopeless", 2) not in expected and ("hopeless", 3) in expected
    assert all(p != "easy" for p, _ in expected)


def test_retired_and_deferred_survive_a_snapshot_file(tmp_path):
    state = _marked_state()
    save_snapshot(state, tmp_path / "buffer.msgpack")
    restored = state_of(["easy", "hopeless", "mid"], retire_solved_after=2, skip_unsolved_after=2)
    load_snapshot(restored, tmp_path / "buffer.msgpack")
    assert _continue(restored) == _continue(state)
    keys = ("retired", "deferred", "deferred_problems")
    assert [restored.stats(0.0)[k] for k in keys] == [state.stats(0.0)[k] for k in keys]


def test_a_snapshot_from_before_online_difficulty_loads():
    state = _marked_state()
    data = export_state(state)
    del data["difficulty"]
    restored = state_of(["easy", "hopeless", "mid"], retire_solved_after=2, skip_unsolved_after=2)
    import_state(restored, data)
    assert not restored.difficulty.retired and not restored.difficulty.rates
    assert "easy" in [p for p, _ in round_of(restored, 3, {})]


def test_a_run_resumed_with_retirement_off_hands_retired_problems_out_again():
    data = export_state(_marked_state())
    restored = state_of(["easy", "hopeless", "mid"], skip_unsolved_after=2)
    import_state(restored, data)
    assert not restored.difficulty.retired and "hopeless" in restored.difficulty.deferred
    assert "easy" in [p for p, _ in round_of(restored, 3, {})]


def test_the_history_is_bounded_and_only_seen_problems_cost_memory():
    t = DifficultyTracker(retire_solved_after=3, skip_unsolved_after=0, history=2)
    assert t.history == 3  # at least K
    for i in range(10):
        t.record("p", 0.5 if i % 2 else 0.25, i)
    assert len(t.rates["p"]) == 3 and list(t.rates) == ["p"]
    assert [round(x, 2) for x in t.pass_rates("p")] == [0.5, 0.25, 0.5]  # the last 3
    off = DifficultyTracker()
    off.record("p", 1.0, 0)
    assert not off.on and off.rates == {} and off.eligible("p", 0)


def test_the_codec_counts_correct_and_judged_responses():
    scores = GroupScores(
        7, [Score(1.0, "AC", 1, 1), Score(0.0, "SE", 0, 1), Score(0.0, "WA", 0, 1)]
    )
    info = check_scores(unpack(scores_frame(scores)))
    assert info.n_scores == 3 and scores_counts(info) == (1, 2) == scores_counts(scores)


def test_the_server_retires_through_the_wire(tmp_path, make_group, make_scores):
    """The real server: scores frames from a client reach the tracker (check_scores ->
    put_scored), and the counts reach the stats a client reads."""
    from microcoder.buffer.client import BufferClient
    from microcoder.buffer.config import BufferConfig
    from microcoder.buffer.server import BufferServer

    server = BufferServer(
        BufferConfig(long_poll_s=0.2),
        DatasetPrompts(["p0", "p1", "p2"], 0, shuffle=False),
        2,
        retire_solved_after=1,
    )
    addr = server.start()
    try:
        with (
            BufferClient(addr, "gen", timeout_s=5) as gen,
            BufferClient(addr, "ex", timeout_s=5) as ex,
        ):
            prompts = gen.get_prompts(2).assignments
            assert [a.problem_id for a in prompts] == ["p0", "p1"]
            groups = [make_group(a.group_id, a.problem_id, versions=(0,) * 4) for a in prompts]
            gen.put_unscored(groups)
            got = ex.get_unscored(2)
            rewards = {"p0": 1.0, "p1": 0.0}  # make_scores: AC for 1.0, WA otherwise
            ex.put_scored([make_scores(g, rewards[g.problem_id]) for g in got])
            later = [a.problem_id for a in gen.get_prompts(4).assignments]
            assert later and "p0" not in later and "p1" in later
            assert ex.stats()["retired"] == 1
    finally:
        server.stop()

"""The select rules of the difficulty filter on the fixture with known pass rates (no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from microcoder.data.difficulty.rates import read_rates
from microcoder.data.difficulty.select import Rules, Score, parse_band, select
from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import Problem

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
K = 8


@pytest.fixture(scope="module")
def fixture():
    problems = load_problems(FIXTURES / "difficulty_problems.jsonl")
    rates = read_rates(FIXTURES / "difficulty_rates.jsonl")
    return problems, {i: Score(r.rate, True) for i, r in rates.items()}


def run(fixture, keep=(0.0, 0.8), share=0.2, seed=0):
    problems, scores = fixture
    return select(problems, scores, Rules(K, keep, share, seed))


def test_always_solved_problems_are_removed_even_when_the_band_reaches_one(fixture):
    sel = run(fixture, keep=(0.0, 1.0))
    _, scores = fixture
    assert all(scores[p.id].rate < 1 for p in sel.kept)
    assert sel.reasons["always_solved"] == 4


def test_never_solved_problems_are_capped_at_the_share_of_the_output(fixture):
    sel = run(fixture, share=0.2)
    _, scores = fixture
    unsolved = [p for p in sel.kept if scores[p.id].rate == 0]
    assert len(unsolved) == 2  # 8 solvable in the band: 2 / 10 = 0.2
    assert len(unsolved) / len(sel.kept) <= 0.2
    assert sel.reasons["unsolved_cap"] == 4


def test_a_zero_share_drops_every_never_solved_problem(fixture):
    _, scores = fixture
    assert all(scores[p.id].rate > 0 for p in run(fixture, share=0.0).kept)


def test_every_solvable_problem_in_the_band_is_kept_and_none_outside(fixture):
    problems, scores = fixture
    sel = run(fixture, keep=(0.2, 0.8))
    kept = {p.id for p in sel.kept}
    in_band = {p.id for p in problems if 0.2 <= scores[p.id].rate <= 0.8}
    assert kept == in_band
    assert sel.reasons["above_band"] == 2 and sel.reasons["below_band"] == 6 + 1


def test_the_same_seed_gives_the_same_selection(fixture):
    assert [p.id for p in run(fixture, seed=3).kept] == [p.id for p in run(fixture, seed=3).kept]


def test_other_seeds_draw_other_never_solved_problems(fixture):
    draws = {tuple(p.id for p in run(fixture, seed=s).kept) for s in range(6)}
    assert len(draws) > 1


def test_the_output_keeps_the_input_order(fixture):
    problems, _ = fixture
    order = {p.id: i for i, p in enumerate(problems)}
    kept = [order[p.id] for p in run(fixture).kept]
    assert kept == sorted(kept)


def test_band_counts_before_and_after_add_up(fixture):
    sel = run(fixture)
    assert sum(sel.before.values()) == 20 and sum(sel.after.values()) == len(sel.kept)
    assert sel.before["always_solved"] == 4 and sel.after["always_solved"] == 0
    assert sel.before["unsolved"] == 6 and sel.after["unsolved"] == 2


def test_a_predicted_rate_is_rounded_to_k_samples_for_the_rules():
    ps = [
        Problem(id=i, kind="stdin", prompt="x", tests=[{"input": "", "output": ""}]) for i in "abc"
    ]
    scores = {"a": Score(0.03, False), "b": Score(0.97, False), "c": Score(0.4, False)}
    sel = select(ps, scores, Rules(K, (0.0, 1.0), 0.0, 0))
    assert [p.id for p in sel.kept] == ["c"]
    assert {r["id"]: r["reason"] for r in sel.removed} == {
        "a": "unsolved_cap",
        "b": "always_solved",
    }


def test_a_problem_without_a_rate_is_removed_as_not_scored(fixture):
    problems, scores = fixture
    unscored = {k: v for k, v in scores.items() if k != "fx12"}
    sel = select(problems, unscored, Rules(K, (0, 1), 0.2, 0))
    assert {"id": "fx12", "reason": "not_scored", "rate": None} in sel.removed


@pytest.mark.parametrize("text", ["0.9-0.1", "abc", "0.1", "-0.1-0.5", "0.2-1.5"])
def test_a_bad_band_is_refused_with_the_expected_form(text):
    with pytest.raises(ValueError, match="--keep"):
        parse_band(text)


def test_a_good_band_parses():
    assert parse_band("0.125-0.75") == (0.125, 0.75)

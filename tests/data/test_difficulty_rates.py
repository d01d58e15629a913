"""The rates file of the difficulty filter: read/append/resume and the planner of what to measure."""

from __future__ import annotations

import pytest

from microcoder.data.difficulty.rates import (
    PassRate,
    append_rates,
    check_identity,
    measure_sample,
    read_rates,
    to_measure,
)
from microcoder.data.problem import Problem


def problems(n: int) -> list[Problem]:
    return [
        Problem(id=f"p{i}", kind="stdin", prompt="x", tests=[{"input": "", "output": ""}])
        for i in range(n)
    ]


def test_the_planner_measures_only_problems_without_a_rate():
    ps = problems(5)
    rates = {"p1": PassRate("p1", 2, 8), "p3": PassRate("p3", 0, 8)}
    assert [p.id for p in to_measure(ps, rates, 8)] == ["p0", "p2", "p4"]


def test_the_planner_measures_again_a_problem_with_fewer_samples_than_asked():
    ps = problems(2)
    rates = {"p0": PassRate("p0", 2, 4), "p1": PassRate("p1", 1, 8)}
    assert [p.id for p in to_measure(ps, rates, 8)] == ["p0"]


def test_appended_rates_read_back_equal(tmp_path):
    path = tmp_path / "rates.jsonl"
    append_rates(path, [PassRate("a", 1, 4, "/m", 1.0, 64)])
    append_rates(path, [PassRate("b", 4, 4, "/m", 1.0, 64)])
    got = read_rates(path)
    assert got == {"a": PassRate("a", 1, 4, "/m", 1.0, 64), "b": PassRate("b", 4, 4, "/m", 1.0, 64)}
    assert got["a"].rate == 0.25


def test_a_torn_last_line_is_ignored_and_cut_by_the_next_append(tmp_path):
    path = tmp_path / "rates.jsonl"
    append_rates(path, [PassRate("a", 1, 4)])
    with path.open("a") as f:
        f.write('{"id": "b", "pass')
    assert set(read_rates(path)) == {"a"}
    append_rates(path, [PassRate("c", 0, 4)])
    assert set(read_rates(path)) == {"a", "c"}
    assert path.read_text().count("\n") == 2


def test_a_bad_line_in_the_middle_names_file_and_line(tmp_path):
    path = tmp_path / "rates.jsonl"
    path.write_text(
        '{"id": "a", "passed": 1, "samples": 4}\n{"id": "b"}\n{"id": "c", "passed": 0, "samples": 4}\n'
    )
    with pytest.raises(ValueError, match=r"rates.jsonl:2"):
        read_rates(path)


def test_passed_above_samples_is_refused(tmp_path):
    path = tmp_path / "rates.jsonl"
    path.write_text(
        '{"id": "a", "passed": 5, "samples": 4}\n{"id": "b", "passed": 0, "samples": 4}\n'
    )
    with pytest.raises(ValueError, match="passed <= samples"):
        read_rates(path)


def test_a_missing_rates_file_reads_as_empty(tmp_path):
    assert read_rates(tmp_path / "none.jsonl") == {}


def test_rates_of_another_model_are_refused_with_the_fix():
    rates = {"a": PassRate("a", 1, 4, "/other", 1.0, 64)}
    with pytest.raises(ValueError, match="another --rates"):
        check_identity(rates, {"model": "/m", "temperature": 1.0, "max_tokens": 64}, "r.jsonl")


def test_hand_given_rates_without_a_model_are_accepted():
    check_identity({"a": PassRate("a", 1, 4)}, {"model": "/m", "temperature": 1.0}, "r.jsonl")


def test_the_measured_sample_has_the_share_and_is_stable_for_a_seed():
    ps = problems(100)
    a, b = measure_sample(ps, 0.2, seed=1), measure_sample(ps, 0.2, seed=1)
    assert len(a) == 20 and [p.id for p in a] == [p.id for p in b]
    assert {p.id for p in a} != {p.id for p in measure_sample(ps, 0.2, seed=2)}


def test_a_larger_share_contains_the_smaller_one():
    ps = problems(50)
    small = {p.id for p in measure_sample(ps, 0.1, 7)}
    assert small <= {p.id for p in measure_sample(ps, 0.3, 7)}


def test_a_share_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="--measure-share"):
        measure_sample(problems(3), 0.0, 0)

"""bench/eval_overlap.py: which steps overlap an eval, and the ratio of their wall times."""

from __future__ import annotations

import pytest

from microcoder.bench.eval_overlap import overlap_report, split_steps


def step(n: int, end: float, seconds: float) -> dict:
    return {"kind": "step", "step": n, "time": end, "step_s": seconds}


RECORDS = [
    step(1, 10.0, 9.0),  # the first step: left out
    step(2, 12.0, 2.0),  # [10, 12]: before the eval
    step(3, 15.0, 3.0),  # [12, 15]: overlaps the eval [14, 20]
    step(4, 18.0, 3.0),  # [15, 18]: inside it
    {"kind": "eval", "step": 3, "policy_version": 3, "started": 14.0, "time": 20.0},
    step(5, 22.0, 2.0),  # [20, 22]: after it (touching is not overlapping)
    {"kind": "event", "event": "x", "time": 21.0},
]


def test_steps_are_split_by_overlap_with_an_eval_and_the_first_is_left_out():
    assert split_steps(RECORDS) == ([3.0, 3.0], [2.0, 2.0])


def test_the_report_gives_the_ratio_and_each_eval_with_its_version_and_length():
    out = overlap_report(RECORDS)
    assert (out["steps_during_eval"], out["steps_without_eval"]) == (2, 2)
    assert out["ratio_median"] == pytest.approx(1.5) and out["ratio_mean"] == pytest.approx(1.5)
    assert out["evals"] == [[3, 3, 6.0]]


def test_no_eval_no_ratio():
    out = overlap_report([step(1, 1.0, 1.0), step(2, 2.0, 1.0)])
    assert out["steps_during_eval"] == 0 and "ratio_median" not in out


def test_the_report_gives_the_training_samples_staleness_during_an_eval_and_without():
    ages = {2: (0.0, 0), 3: (1.0, 1), 4: (2.0, 2), 5: (0.5, 1)}
    records = [
        {**r, "staleness_mean": ages[r["step"]][0], "staleness_max": ages[r["step"]][1]}
        if r.get("kind") == "step" and r["step"] in ages
        else r
        for r in RECORDS
    ]
    records[4] = {**records[4], "eval_generators": ["eval-generator-0"]}
    out = overlap_report(records)
    assert out["staleness_mean_during"] == pytest.approx(1.5)
    assert out["staleness_mean_without"] == pytest.approx(0.25)
    assert (out["staleness_max_during"], out["staleness_max_without"]) == (1.5, 0.5)
    assert out["eval_generators"] == ["eval-generator-0"]

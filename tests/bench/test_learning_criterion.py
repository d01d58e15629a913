"""The learning criterion (bench/learning.py) on the learning bench's recorded runs
(tests/fixtures/learning): it passes every trained run and fails every lr = 0 control, each
control on the greedy rise, which lr = 0 cannot move. The launch test (tests/launch/
test_learning.py) runs one trained launch; the controls' side of the check lives here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from microcoder.bench.learning import MARGINS, STEPS, criterion

RECORDED = Path(__file__).parents[1] / "fixtures" / "learning"
ROUNDS = range(5)


@pytest.mark.parametrize("i", ROUNDS)
def test_each_recorded_trained_run_passes_the_criterion(i):
    got = criterion(RECORDED / f"trained-{i}")
    assert got["steps"] == STEPS and got["evals"] == 2
    assert got["passed"], got


@pytest.mark.parametrize("i", ROUNDS)
def test_each_recorded_lr_zero_control_fails_it_on_the_greedy_rise(i):
    got = criterion(RECORDED / f"lr0-{i}")
    assert got["steps"] == STEPS and len(got["temperatures"]) == 1
    assert got["greedy"][0] == got["greedy"][1]  # the weights never moved
    assert got["greedy_margin"] == -MARGINS["greedy"]
    assert not got["passed"], got


@pytest.mark.parametrize("i", ROUNDS)
def test_each_trained_run_ends_above_its_control_from_the_same_start(i):
    trained, control = criterion(RECORDED / f"trained-{i}"), criterion(RECORDED / f"lr0-{i}")
    assert trained["greedy"][0] == control["greedy"][0]  # the same model and held-out set
    assert trained["greedy"][1] >= control["greedy"][1] + 0.10, (trained, control)
    assert trained["heldout"][1] >= control["heldout"][1] + 0.10, (trained, control)


def test_a_run_whose_reward_was_sampled_at_two_temperatures_fails(tmp_path):
    """A reward rise measured across a temperature change is not comparable: the criterion
    refuses it even when every margin holds."""
    lines = (RECORDED / "trained-0" / "metrics.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        if r["kind"] == "step" and r["step"] > STEPS // 2:
            r["temperature"] += 0.2
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    got = criterion(tmp_path)
    assert all(got[f"{n}_margin"] >= 0 for n in MARGINS)
    assert not got["passed"]

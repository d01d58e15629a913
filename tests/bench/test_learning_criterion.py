"""The learning criterion (bench/learning.py) on the learning bench's recorded runs
(tests/fixtures/learning): it passes every trained run and fails every lr = 0 control, each
control on the greedy rise, which lr = 0 cannot move; and the paired comparison
(`beats_control`) holds for each trained run against its control, never for an lr = 0 run in the
trained arm's place, nor for arms that did not start from one warm start. The launch test
(tests/launch/test_learning.py) launches both arms again, side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from microcoder.bench.learning import MARGINS, STEPS, beats_control, criterion

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


@pytest.mark.parametrize("i", ROUNDS)
def test_each_trained_run_beats_its_control(i):
    paired = beats_control(criterion(RECORDED / f"trained-{i}"), criterion(RECORDED / f"lr0-{i}"))
    assert paired["same_start"] and paired["passed"], paired


@pytest.mark.parametrize("i", ROUNDS)
def test_an_lr_zero_run_in_the_trained_arms_place_does_not_beat_its_control(i):
    """What the launch test would see if its trained arm did not learn: lr = 0 on the control's
    start never moves the greedy rate (the recorded controls' own rise is 0), so the control's
    record stands for that arm too. (Another round's control is no stand-in: each seed draws its
    own held-out set.)"""
    control = criterion(RECORDED / f"lr0-{i}")
    paired = beats_control(dict(control), control)
    assert paired["same_start"], paired
    assert paired["greedy_gap"] == 0.0
    assert not paired["passed"], paired


def test_a_control_from_another_warm_start_is_no_pair():
    """Issue 44's new machine: its warm start began at greedy 0.7375, the recorded control at
    0.4375. Such a pair is refused whatever the gaps say."""
    trained, control = criterion(RECORDED / "trained-0"), criterion(RECORDED / "lr0-0")
    control["greedy"] = [g - 0.3 for g in control["greedy"]]
    control["heldout"] = [h - 0.3 for h in control["heldout"]]
    paired = beats_control(trained, control)
    assert paired["greedy_gap"] >= 0.10 and paired["heldout_gap"] >= 0.10
    assert not paired["same_start"] and not paired["passed"], paired


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

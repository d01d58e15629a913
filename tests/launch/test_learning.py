"""The embedded default learns: the warm-started tiny model, 30 RL steps through the real
`microcoder launch`, passes the learning criterion (bench/learning.py: greedy and sampled
held-out pass rates and the batch reward at one temperature all rise by their margins); the same
run with learning rate 0, its paired control, does not, and the trained run ends above it (so
the assertions can fail). Steps are counted, not seconds. `microcoder bench learning` repeats
the pair to measure the false-failure rate (bench/RESULTS.md)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from microcoder.bench.learning import STEPS, criterion, launch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # the warm start, then two launches


@pytest.fixture(scope="module")
def runs(warm_model_dir):
    """The trained run and its lr = 0 control, on the session's warm-started model."""
    got = {}
    for arm, extra in (("trained", ()), ("lr0", ("--set", "learner.lr=0"))):
        run_dir = Path(tempfile.mkdtemp(prefix=f"mc-learn-{arm}-"))
        res = launch(warm_model_dir, run_dir, *extra)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        assert "held-out pass rate" in res.stdout  # the end-of-run table
        got[arm] = criterion(run_dir)
    return got


def test_rl_raises_heldout_pass_rate_and_batch_reward(runs):
    got = runs["trained"]
    assert got["steps"] == STEPS and got["evals"] == 2
    assert len(got["temperatures"]) == 1, got  # every reward sampled at one temperature
    assert got["greedy_margin"] >= 0, got
    assert got["heldout_margin"] >= 0, got
    assert got["reward_margin"] >= 0, got
    assert got["passed"], got


def test_learning_rate_zero_does_not_pass_the_same_criteria(runs):
    got = runs["lr0"]
    assert got["steps"] == STEPS
    assert not got["passed"], got


def test_the_trained_run_ends_above_its_lr_zero_control(runs):
    """The paired comparison: same model, recipe and evaluation; only the learning differs."""
    trained, control = runs["trained"], runs["lr0"]
    assert trained["greedy"][1] >= control["greedy"][1] + 0.10, (trained, control)
    assert trained["heldout"][1] >= control["heldout"][1] + 0.10, (trained, control)

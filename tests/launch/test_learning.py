"""The embedded default learns: the warm-started tiny model, 30 RL steps through the real
`microcoder launch`, passes the learning criterion (bench/learning.py: greedy and sampled
held-out pass rates and the batch reward at one temperature all rise by their margins), and ends
above its paired lr = 0 control (`beats_control`).

The control is launched in this session, beside the trained run and on the same warm start
(seed 0 both): the same model, held-out set and recipe with no learning. It runs CONTROL_STEPS
steps, not 30: with lr = 0 its weights never move, so its evaluation after 2 steps is the one it
would make after 30 (the same weights, temperature and held-out set), and its 28 more steps of
sampling, judging and training cost ~4 CPU-minutes (a whole 30-step arm took 294 CPU-seconds
alone, bench/RESULTS.md "Test tiers"). `microcoder bench learning` still runs its controls to 30 steps
(its false-pass count needs the batch-reward windows). A control recorded on
another machine is no pair: the warm start is not reproduced bit for bit across machines (issue
44: the recorded control started at greedy 0.4375, a new machine's warm start at 0.7375). The
two launches run at once, beside the other batched modules' launches (launch_testing.batch). The recorded runs of the learning bench
(tests/fixtures/learning) check the criterion and the pairing fast
(tests/bench/test_learning_criterion.py). Steps are counted, not seconds."""

from __future__ import annotations

import pytest
from launch_testing.batch import declare

from microcoder.bench.learning import (
    ARMS,
    MARGINS,
    SAME_START,
    STEPS,
    beats_control,
    criterion,
    launch_args,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # the warm start, then two launches

CONTROL_STEPS = 2
"""Steps of the lr = 0 arm: its evaluations at step 0 and CONTROL_STEPS (weights that never move)."""
SHORT = {"lr0": ("--set", f"max_steps={CONTROL_STEPS}", "--set", f"eval.every={CONTROL_STEPS}")}
"""`launch` arguments after an arm's `ARMS` entry (a later --set wins)."""

for _arm, _extra in ARMS.items():
    _extra = (*_extra, *SHORT.get(_arm, ()))
    declare(
        __file__,
        f"learning-{_arm}",
        lambda run_dir, model_dir, extra=_extra: launch_args(model_dir, run_dir, *extra),
        model="warm_model_dir",
        timeout_s=1400,
    )


@pytest.fixture(scope="module")
def arms(launch_batch, request):
    """Both arms (`ARMS`: trained and lr = 0, seed 0) on the session's warm-started model, each
    run to its end (started by the batch); their `criterion` results by arm."""
    jobs = {}
    try:
        for arm in ARMS:
            jobs[arm] = launch_batch.wait(f"learning-{arm}", request.getfixturevalue)
            res = jobs[arm].result()
            assert res.returncode == 0, (
                f"the {arm} launch exited {res.returncode}; its log ends:\n"
                f"{res.stdout[-3000:]}{res.stderr[-3000:]}"
            )
    finally:
        for arm in ARMS:
            launch_batch.stop(f"learning-{arm}")  # the other arm, when one failed
    trained = jobs["trained"].result()
    assert "held-out pass rate" in trained.stdout + trained.stderr  # the end-of-run table
    return {arm: criterion(job.run_dir) for arm, job in jobs.items()}


def test_rl_raises_heldout_pass_rate_and_batch_reward(arms):
    got = arms["trained"]
    assert got["steps"] == STEPS and got["evals"] == 2
    assert len(got["temperatures"]) == 1, got  # every reward sampled at one temperature
    assert got["greedy_margin"] >= 0, got
    assert got["heldout_margin"] >= 0, got
    assert got["reward_margin"] >= 0, got
    assert got["passed"], got


def test_the_control_starts_where_the_trained_run_starts(arms):
    """The pairing holds only for the same model and held-out set: both arms' greedy rate at
    step 0 (no sampling) is one start, within `SAME_START` (a greedy decode batched otherwise
    may round differently)."""
    paired = beats_control(arms["trained"], arms["lr0"])
    assert paired["same_start"], (paired, arms)


def test_the_lr_zero_control_fails_the_criterion(arms):
    """lr = 0 never moves the weights: the control's greedy rate stays where it started (within
    a greedy decode's rounding in another batch, `SAME_START`), so the criterion's greedy rise
    fails it, whatever its length (it would pass a run that did not learn otherwise)."""
    control = arms["lr0"]
    assert control["steps"] == CONTROL_STEPS and control["evals"] == 2
    assert abs(control["greedy_rise"]) <= SAME_START, control
    assert control["greedy_rise"] < MARGINS["greedy"] and control["greedy_margin"] < 0, control
    assert not control["passed"], control


def test_the_trained_run_ends_above_its_lr_zero_control(arms):
    """The paired comparison: same model, recipe and evaluation; only the learning differs."""
    paired = beats_control(arms["trained"], arms["lr0"])
    assert paired["greedy_gap"] >= 0.10, (paired, arms)
    assert paired["heldout_gap"] >= 0.10, (paired, arms)
    assert paired["passed"], (paired, arms)

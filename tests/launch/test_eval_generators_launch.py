"""A tiny launch with a generator set aside for the eval (eval.generators = 1, issue 49 item 4):
the placement plan shows its pool, the run starts it beside the training generator, every eval
beside training samples on it alone at the learner's version of its step (the record names
both), the training generator's log never says it held a version (the set-aside one's says so
at every eval), and the run trains to its end meanwhile. The stand-in test
(tests/launch/test_eval_beside.py) checks the same of `hold_pool` without Ray; the staleness of training samples with and without it is measured in bench/RESULTS.md
("Generators set aside for the eval")."""

from __future__ import annotations

import pytest
from launch_testing.launched import QUICK, SMALL_BATCH, assert_finished, finished_launch
from launch_testing.launched import metrics_records as records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the launch runs in the module fixture

STEPS = 4
SETTINGS = [
    *QUICK,
    f"max_steps={STEPS}",
    *SMALL_BATCH,
    "eval.every=2",
    "eval.problems=8",
    "eval.generators=1",
]

finished_run = finished_launch("eval-generators", SETTINGS)


def test_the_run_finishes_its_steps(finished_run):
    assert_finished(*finished_run, steps=STEPS)


def test_each_eval_samples_on_the_set_aside_generator_at_its_steps_version(finished_run):
    proc, run_dir = finished_run
    evals = records(run_dir, "eval")
    assert [r["step"] for r in evals] == [0, 2, 4], proc.stdout[-3000:]
    for r in evals:
        assert r["eval_generators"] == ["eval-generator-0"]
        assert r["policy_version"] == r["step"] and r["policy_versions_seen"] == [r["step"]]
    assert "eval-gen" in proc.stdout  # the placement plan's row
    assert "starting 1 generator(s) set aside for the eval" in proc.stdout


def test_only_the_set_aside_generator_held_a_version(finished_run):
    """Each actor's log (RUN_DIR/logs) says when it held a version for an eval
    (actors/weights/follower.py `hold`): the set-aside generator at every eval, the training
    generator never."""
    _, run_dir = finished_run
    aside = (run_dir / "logs" / "eval-generator-0.log").read_text()
    training = (run_dir / "logs" / "generator-0.log").read_text()
    for step in (0, 2, 4):
        assert f"eval-generator-0: holding version {step} for a held-out eval" in aside
    assert "holding version" not in training

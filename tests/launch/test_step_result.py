"""LearnerGroup.step reads each learner step once into a typed StepResult
(launch/run/step_result.py): the values the training loop steers on apart from the metrics it
logs."""

from __future__ import annotations

from microcoder.launch.run.step_result import StepResult


def trained(**extra) -> dict:
    return {
        "version": 3.0,
        "loss": 0.1,
        "reward_mean": 0.5,
        "filtered_groups": 1.0,
        "diversity": 0.4,
        "update_skipped": 0.0,
        "skipped_in_a_row": 0.0,
        "wait_s": 1.0,
        "compute_s": 2.0,
        "sync_s": 0.5,
        "gather_s": 0.1,
        **extra,
    }


def test_a_trained_step_steers_on_typed_fields_and_logs_the_rest():
    m = trained(rollouts=[{"row": 1}])
    res = StepResult.of(m)
    assert (res.version, res.skipped, res.update_skipped, res.diversity) == (3, False, False, 0.4)
    assert res.timings == {"wait_s": 1.0, "compute_s": 2.0, "sync_s": 0.5}
    assert res.rollouts == [{"row": 1}]
    # the "step" record's fields are the learner's, as before, less the rollouts rows
    assert res.metrics == trained() and "rollouts" in m  # the learner's dict is not changed


def test_a_skipped_and_a_guarded_step():
    filtered = StepResult.of({"skipped": 1.0, "version": 3.0, "filtered_groups": 4.0})
    assert (
        filtered.skipped and filtered.filtered_groups == 4.0 and "skipped" not in filtered.metrics
    )
    guarded = StepResult.of(trained(update_skipped=1.0, skipped_in_a_row=2.0))
    assert guarded.update_skipped and guarded.skipped_in_a_row == 2 and not guarded.skipped
    assert guarded.metrics["update_skipped"] == 1.0  # the record still carries it

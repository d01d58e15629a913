"""When dynamic filtering rejects every group for the patience, the run says so with the
measured pass rate, then stops or trains unfiltered as configured (unit test of the rule; the
real launch in test_launch_real_data.py exercises train-unfiltered end to end)."""

from __future__ import annotations

from types import SimpleNamespace

from microcoder.launch.config import load_config
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.run.step_result import StepResult
from microcoder.launch.run.training_loop import all_filtered


class StandInLearners:
    version = 7

    def __init__(self):
        self.filtering: list[bool] = []

    def set_dynamic_filtering(self, on: bool) -> None:
        self.filtering.append(on)


def stand_in_run(tmp_path, action: str):
    cfg = load_config(None, [f'algorithm.all_filtered_action="{action}"'])
    lines: list[str] = []
    run = SimpleNamespace(
        cfg=cfg, metrics=MetricsLogger(tmp_path), learners=StandInLearners(), log=lines.append
    )
    return run, lines


def skipped(groups: float, reward_mean: float) -> StepResult:
    """A skipped step as the loop reads it from the learner group's dict."""
    m = {"skipped": 1.0, "version": 7.0, "filtered_groups": groups, "reward_mean": reward_mean}
    return StepResult.of(m)


SKIPPED_EASY = [skipped(4.0, 1.0), skipped(2.0, 1.0)]
SKIPPED_HARD = [skipped(4.0, 0.0), skipped(4.0, 0.25)]


def test_stop_returns_why_with_the_measured_pass_rate_and_the_remedies(tmp_path):
    run, lines = stand_in_run(tmp_path, "stop")
    why = all_filtered(run, SKIPPED_HARD)
    assert "measured pass rate 0.125" in why and "too hard" in why
    assert "train-unfiltered" in lines[-1] and run.learners.filtering == []
    (event,) = [r for r in run.metrics.history if r.get("event") == "all_filtered"]
    assert event["pass_rate"] == 0.125 and event["step"] == 7


def test_all_passing_groups_are_called_too_easy(tmp_path):
    run, _ = stand_in_run(tmp_path, "stop")
    assert "too easy" in all_filtered(run, SKIPPED_EASY)


def test_train_unfiltered_switches_filtering_off_and_goes_on(tmp_path):
    run, lines = stand_in_run(tmp_path, "train-unfiltered")
    assert all_filtered(run, SKIPPED_HARD) == ""
    assert run.learners.filtering == [False]
    assert "training on unfiltered groups" in lines[-1]

"""The diversity-determined temperature inside a real launch of the tiny config (random-weight
model): calibration on a constructed diversity curve, a schedule stage reaching the generators,
and a resume continuing at the saved temperature without calibrating again.

The curve is known by construction, from the two ends: at T = 2.0 the random-weight model samples
nearly uniform tokens (diversity 1.0 measured); at T = 0.001 sampling is near-greedy, and its
near-tied logits leave the responses 0.3-0.5 diverse (tests/actors/test_generator.py; T = 0.05
already gives 0.93). With the target 0.8 between the two ends calibration must pick 2.0.
One launch (3 steps, schedule stage [2, 0.5]) and one resume of it (to step 5, adding the stage
[4, 1.0]) serve every test; they run in file order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_testing.launched import run_launch

pytestmark = pytest.mark.slow

LOW, HIGH, TARGET, STAGE_T = 0.001, 2.0, 0.8, 0.5
LATE_T = 1.0
"""A stage at step 4 that only the resume's --set adds."""
SCHEDULE = "algorithm.temperature.schedule"
SETTINGS = {
    "learner.batch_size": "4",
    "generator.max_inflight_prompts": "4",
    "generator.max_response_tokens": "32",
    "algorithm.group_size": "4",
    "executor.workers": "1",
    "monitor.dashboard_port": "0",
    "model.warmstart": "false",
    "algorithm.dynamic_filtering": "false",
    "eval.every": "0",
    "learner.checkpoint_every": "0",  # the only checkpoint is the one written at the end
    "algorithm.temperature.calibrate": "true",
    "algorithm.temperature.candidates": f"[{LOW}, {HIGH}]",
    "algorithm.temperature.target_diversity": str(TARGET),
    "algorithm.temperature.probe_prompts": "4",
    "algorithm.temperature.monitor_window": "0",
    SCHEDULE: f"[[2, {STAGE_T}]]",
}


def set_args(settings: dict[str, str]) -> list[str]:
    return [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]


def records(run_dir: Path, kind: str, **match) -> list[dict]:
    rows = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return [r for r in rows if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]


def generator_temperatures(step_record: dict) -> list[float]:
    return [r["temperature"] for r in step_record["replicas"] if r["name"].startswith("generator")]


@pytest.fixture(scope="module")
def launched_run(tiny_model_dir, tmp_path_factory):
    """The 3-step run (its stdout kept), then its resume to step 5 with one more stage (stdout
    kept too)."""
    run_dir = tmp_path_factory.mktemp("temperature") / "run"
    first = run_launch(
        [
            "configs/tiny-cpu.toml",
            "--run-dir",
            str(run_dir),
            "--set",
            "max_steps=3",
            "--set",
            f'model.path="{tiny_model_dir}"',
            *set_args(SETTINGS),
        ],
        timeout=900,
    )
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    steps_before = len(records(run_dir, "step"))
    resume = ["--resume", str(run_dir), "--set", "max_steps=5"]
    second = run_launch(
        [*resume, "--set", f"{SCHEDULE}=[[2, {STAGE_T}], [4, {LATE_T}]]"], timeout=900
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    return run_dir, first.stdout, second.stdout, steps_before


def test_calibration_on_the_constructed_curve_picks_the_high_candidate(launched_run):
    run_dir = launched_run[0]
    (cal,) = records(run_dir, "event", event="calibration")
    table = dict(map(tuple, cal["table"]))
    assert table[LOW] < TARGET <= table[HIGH]
    assert (cal["chosen"], cal["reached_target"]) == (HIGH, True)


def test_the_calibration_table_is_in_the_launch_log(launched_run):
    out = launched_run[1]
    assert "temperature calibration (target diversity 0.800):" in out
    assert f"T={HIGH:<5g} diversity=" in out and "<- chosen" in out


def test_the_first_steps_sample_at_the_calibrated_temperature(launched_run):
    run_dir, steps_before = launched_run[0], launched_run[3]
    first_two = records(run_dir, "step")[:2]
    assert steps_before == 3
    assert [r["temperature"] for r in first_two] == [HIGH, HIGH]
    assert [generator_temperatures(r) for r in first_two] == [[HIGH], [HIGH]]


def test_a_schedule_stage_reaches_the_generators_and_the_step_records(launched_run):
    run_dir = launched_run[0]
    (stage,) = records(run_dir, "event", event="temperature", cause="schedule", step=2)
    third = records(run_dir, "step", step=3)[0]
    assert (stage["step"], stage["before"], stage["temperature"]) == (2, HIGH, STAGE_T)
    assert third["temperature"] == STAGE_T and generator_temperatures(third) == [STAGE_T]


def test_the_resumed_run_continues_at_the_saved_temperature(launched_run):
    run_dir = launched_run[0]
    (fourth,) = records(run_dir, "step", step=4)
    assert fourth["temperature"] == STAGE_T and generator_temperatures(fourth) == [STAGE_T]


def test_a_stage_the_resume_adds_applies_from_its_step(launched_run):
    run_dir = launched_run[0]
    (fifth,) = records(run_dir, "step", step=5)
    assert fifth["temperature"] == LATE_T and generator_temperatures(fifth) == [LATE_T]


def test_the_resumed_run_does_not_calibrate_again(launched_run):
    run_dir, _, resumed_out, _ = launched_run
    (resume,) = records(run_dir, "event", event="temperature", cause="resume")
    assert len(records(run_dir, "event", event="calibration")) == 1
    assert "temperature calibration" not in resumed_out
    assert (resume["step"], resume["temperature"]) == (3, STAGE_T)

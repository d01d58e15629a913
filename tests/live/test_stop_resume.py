"""The end of the live run (these tests run after every other test of tests/live): Ctrl-C
checkpoints and `--resume` continues from it, at the saved temperature, without calibrating
again, with a schedule stage the resume adds; then a learner rank killed in a resumed run stops
it, naming the checkpoint to resume from (in the output and in metrics.jsonl)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from launch_testing.launched import run_launch, start_launch
from launch_testing.live import HIGH, LATE_T, SCHEDULE, STAGE_T
from launch_testing.waiting import wait_for

pytestmark = pytest.mark.ends_live_run


def checkpoints(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "checkpoints").glob("step_*"), key=lambda p: int(p.name[5:]))


def generator_temperatures(step_record: dict) -> list[float]:
    return [r["temperature"] for r in step_record["replicas"] if r["name"].startswith("generator")]


@pytest.fixture(scope="module")
def resumed(live):
    """Ctrl-C the live run, then resume it for two more steps, adding a stage at the second:
    (the saved step, the buffer counters before, the resume's output)."""
    live.proc.signal(signal.SIGINT)
    code = live.proc.wait(timeout=240)
    saved = int(checkpoints(live.run_dir)[-1].name[5:])
    before = live.last_step()["buffer"]
    stages = f"[[2, {STAGE_T}], [{saved + 2}, {LATE_T}]]"
    args = ["--resume", str(live.run_dir), "--set", f"max_steps={saved + 2}"]
    res = run_launch([*args, "--set", f"{SCHEDULE}={stages}"], timeout=420)
    return code, saved, before, res


@pytest.mark.timeout(720)
def test_ctrl_c_checkpoints_and_resume_continues_from_it(live, resumed):
    code, saved, before, res = resumed
    assert code == 130
    newest = checkpoints(live.run_dir)[-1]
    assert (newest / "COMPLETE").exists() and (newest / "buffer.snapshot").exists()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    steps = live.steps()
    resumed_steps = [r for r in steps if r["step"] > saved]
    assert [r["policy_version"] for r in resumed_steps] == [saved + 1, saved + 2]
    after = resumed_steps[-1]["buffer"]
    assert after["invariant_ok"] and after["consumed"] >= before["consumed"]


def test_the_resumed_run_continues_at_the_saved_temperature(live, resumed):
    """The monitor had raised T to 2.0 before the Ctrl-C (test_temperature.py)."""
    saved = resumed[1]
    (first,) = live.records("step", step=saved + 1)
    assert first["temperature"] == HIGH and generator_temperatures(first) == [HIGH]
    (resume,) = live.records("event", event="temperature", cause="resume")
    assert (resume["step"], resume["temperature"]) == (saved, HIGH)


def test_a_stage_the_resume_adds_applies_from_its_step(live, resumed):
    saved = resumed[1]
    (last,) = live.records("step", step=saved + 2)
    assert last["temperature"] == LATE_T and generator_temperatures(last) == [LATE_T]


def test_the_resumed_run_does_not_calibrate_again(live, resumed):
    assert len(live.records("event", event="calibration")) == 1
    assert "temperature calibration" not in resumed[3].stdout


def learner_rank_pid(launcher_pid: int) -> int | None:
    """Pid of a learner rank actor among the launcher's descendants (Ray names the process)."""
    import psutil

    for child in psutil.Process(launcher_pid).children(recursive=True):
        try:
            if child.cmdline()[:1] and child.cmdline()[0].startswith("ray::LearnerRank"):
                return child.pid
        except psutil.Error:
            continue
    return None


@pytest.mark.timeout(600)
def test_a_dead_learner_stops_the_run_and_names_the_checkpoint_to_resume(live, resumed):
    run_dir = live.run_dir  # the resume above left a finished run with checkpoints
    log_path = run_dir.parent / "learner-death.log"
    args = ["--resume", str(run_dir), "--set", "max_steps=100000"]
    with start_launch(args, log=log_path) as proc:
        n = len(live.steps())
        wait_for(lambda: len(live.steps()) > n, 300, "a step of the resumed run", proc)
        pid = wait_for(lambda: learner_rank_pid(proc.pid), 60, "the learner rank's process")
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(timeout=240) == 1
    text = log_path.read_text()
    assert "the run stopped" in text, text[-3000:]
    # ... and says so in metrics.jsonl too (what `microcoder compare` reports beside the exit)
    from microcoder.launch.metrics_log import read_metrics

    said = [r for r in read_metrics(run_dir / "metrics.jsonl", "event") if r["event"] == "stopped"]
    assert said and f"the run stopped: {said[-1]['message']}" in text
    complete = [p for p in checkpoints(run_dir) if (p / "COMPLETE").exists()]
    newest = complete[-1]
    assert f"resume with: microcoder launch --resume {run_dir}   (from {newest.name})" in text

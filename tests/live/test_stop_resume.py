"""The end of the live run (these tests run after every other test of tests/live): Ctrl-C
checkpoints and `--resume` continues from it, at the saved temperature, without calibrating
again, with a schedule stage the resume adds. (A learner rank or the buffer killed in a run
stops it, naming the checkpoint to resume from: tests/launch/test_chaos.py.)"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from launch_testing.launched import run_launch
from launch_testing.live import HIGH, LATE_T, SCHEDULE, STAGE_T, generator_temperatures

pytestmark = pytest.mark.ends_live_run


def checkpoints(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "checkpoints").glob("step_*"), key=lambda p: int(p.name[5:]))


@pytest.fixture(scope="module")
def resumed(live):
    """Ctrl-C the live run, then resume it for two more steps, adding a stage once the first is
    done (a stage at step s sets the temperature the steps after s sample at):
    (the launcher's exit code, the saved step, the buffer counters before, the resume's output)."""
    live.proc.signal(signal.SIGINT)
    code = live.proc.wait(timeout=240)
    saved = int(checkpoints(live.run_dir)[-1].name[5:])
    before = live.last_step()["buffer"]
    stages = f"[[2, {STAGE_T}], [{saved + 1}, {LATE_T}]]"
    args = ["--resume", str(live.run_dir), "--set", f"max_steps={saved + 2}"]
    res = run_launch([*args, "--set", f"{SCHEDULE}={stages}"], timeout=420)
    return code, saved, before, res


@pytest.mark.timeout(720)
def test_ctrl_c_checkpoints_and_resume_continues_from_it(live, resumed):
    code, saved, before, res = resumed
    assert code == 130
    newest = live.run_dir / "checkpoints" / f"step_{saved}"  # the Ctrl-C's (the resume adds more)
    assert (newest / "COMPLETE").exists() and (newest / "buffer.snapshot").exists()
    out = live.log.read_text()
    assert "interrupted: checkpointing, then shutting down" in out
    assert f"checkpoint step {saved} -> {newest}" in out
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    restoring = [ln for ln in res.stdout.splitlines() if "starting the buffer (restoring " in ln]
    assert restoring and newest.name in restoring[0], res.stdout[-3000:]
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

"""`microcoder launch CONFIG --run-dir DIR --resume auto`, the same command run twice with a
kill -9 between, ends as one uninterrupted run of that command does (issue 49, item 2), by the
checks of the resume in tests/launch/test_chaos.py: it runs to its final step, whose checkpoint
is COMPLETE, with the same learner state (version, scheduler) and the same buffer accounting
(every batch consumed once, the invariant holds). The weights are not compared: which samples a
step trains on depends on the generators' timing, resumed or not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from launch_testing.launched import SMALL_RUN
from launch_testing.waiting import records, wait_for

from microcoder.launch.run_dirs import latest_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

FINAL = 6
BATCH = 4


def command(run_dir: Path, model: Path) -> list[str]:
    sets = [
        f"max_steps={FINAL}",
        f"learner.batch_size={BATCH}",
        "learner.checkpoint_every=2",
        f'model.path="{model}"',
        *SMALL_RUN,
        "generator.enforce_eager=true",
    ]
    args = ["configs/tiny-cpu.toml", "--run-dir", str(run_dir), "--resume", "auto"]
    args += [a for s in sets for a in ("--set", s)]
    return [sys.executable, "-m", "microcoder", "launch", *args]


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen, log: Path) -> str:
    try:
        rc = proc.wait(timeout=600)
    finally:
        kill_group(proc)
    text = log.read_text()
    assert rc == 0, text[-4000:]
    return text


def kill_group(proc: subprocess.Popen) -> None:
    """kill -9 the launcher and everything of its session (its Ray), as a preemption would."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):
    """The uninterrupted run ("straight") and the killed-and-rerun one ("twice") of the same
    command. They are independent (own run folders, own local Ray), so the straight run goes
    beside the twice run's two starts: a tiny launch waits more than it computes, and the
    module's wall is then about two launches, not three."""
    folder = tmp_path_factory.mktemp("resume-auto")
    straight, twice = folder / "straight", folder / "twice"
    out = {"straight": straight, "twice": twice}
    reference = start(command(straight, tiny_model_dir), folder / "straight.log")
    try:
        first = start(command(twice, tiny_model_dir), folder / "first.log")
        try:
            wait_for(lambda: latest_checkpoint(twice), 600, "the first complete checkpoint", first)
            assert first.poll() is None, "the run ended before it could be killed"
        finally:
            kill_group(first)
        out["first_log"] = (folder / "first.log").read_text()
        out["killed_at"] = latest_checkpoint(twice)
        out["second_log"] = finish(
            start(command(twice, tiny_model_dir), folder / "second.log"), folder / "second.log"
        )
        out["straight_log"] = finish(reference, folder / "straight.log")
    finally:
        kill_group(reference)  # when the twice run failed first
    return out


def trainer_state(run_dir: Path) -> dict:
    return json.loads(
        (run_dir / "checkpoints" / f"step_{FINAL}" / "trainer_state.json").read_text()
    )


def test_each_start_says_what_it_did(runs):
    twice = runs["twice"]
    assert f"--resume auto: {twice} has no complete checkpoint; starting fresh" in runs["first_log"]
    step = runs["killed_at"].name
    assert f"--resume auto: resuming {twice} from {step}" in runs["second_log"]
    assert step != f"step_{FINAL}"  # killed before the end: the second start had work to do


def test_the_killed_and_rerun_command_ends_as_the_uninterrupted_one(runs):
    straight, twice = runs["straight"], runs["twice"]
    for run_dir in (straight, twice):
        assert latest_checkpoint(run_dir).name == f"step_{FINAL}"
        assert records(run_dir, "step")[-1]["policy_version"] == FINAL
        assert not list((run_dir / "checkpoints").glob("*.partial"))
    a, b = trainer_state(straight), trainer_state(twice)
    assert a == b  # version, scheduler state, seed, world size
    last = [records(d, "step")[-1]["buffer"] for d in (straight, twice)]
    assert [x["invariant_ok"] for x in last] == [True, True]
    assert last[0]["batch_size"] == last[1]["batch_size"] == BATCH


def test_the_rerun_trained_only_the_steps_after_its_checkpoint(runs):
    resumed_from = int(runs["killed_at"].name[5:])
    steps = [r["step"] for r in records(runs["twice"], "step")]
    assert steps[-(FINAL - resumed_from) :] == list(range(resumed_from + 1, FINAL + 1))

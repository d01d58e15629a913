"""Asynchronous checkpoints (learner/checkpoint.py: start_save): the learner trains on while a
background writer writes what was snapshotted; a kill -9 mid-save leaves the previous checkpoint
whole and resumable, and the partial one is ignored, then deleted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from learner_ranks import spawn_ranks
from safetensors.torch import load_file
from test_fsdp_train import assert_same_weights, run_ranks

from microcoder.launch.run.checkpoint_retention import prune_checkpoints
from microcoder.launch.run_dirs import latest_checkpoint
from microcoder.learner.distributed import free_port

WORKER = Path(__file__).with_name("async_save_worker.py")
TRAIN_WORKER = Path(__file__).with_name("train_worker.py")


@pytest.mark.slow
def test_a_step_overlapping_the_write_leaves_the_checkpoint_as_snapshotted(small_model, tmp_path):
    """The checkpoint started after step 1 and written during step 2 resumes to the same step 2
    as the uninterrupted run (bit-exact): nothing the writer wrote came from live memory."""
    spawn_ranks(1, [str(WORKER), str(small_model), str(tmp_path), "overlap"])
    ckpt = tmp_path / "ckpt"
    assert json.loads((ckpt / "trainer_state.json").read_text())["policy_version"] == 1
    resumed = run_ranks(small_model, tmp_path / "resumed", 1, mode=f"from:{ckpt}")
    assert resumed[1]["version"] == 2
    assert_same_weights(
        load_file(tmp_path / "resumed" / "weights.safetensors"),
        load_file(tmp_path / "weights.safetensors"),
        atol=0,
    )


def kill_mid_save(model: Path, out: Path) -> str:
    """Run the `kill` worker and SIGKILL it as soon as its step-2 writer is running."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    env |= {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(model), str(out), "kill"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    deadline = time.monotonic() + 300
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.strip() == "WRITING":
                os.kill(proc.pid, signal.SIGKILL)
                break
            assert time.monotonic() < deadline, "the worker never started its second save"
    finally:
        proc.kill()
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "".join(seen[-40:])
    return "".join(seen)


@pytest.mark.slow
def test_kill_during_a_save_leaves_the_previous_checkpoint_resumable(small_model, tmp_path):
    kill_mid_save(small_model, tmp_path)
    ckpts = tmp_path / "checkpoints"
    partial = ckpts / "step_2.partial"
    assert partial.is_dir()  # the killed save left its partial folder, killed mid-write:
    assert not (partial / "trainer_state.json").exists()  # the writer's last file
    assert not (ckpts / "step_2").exists()
    assert latest_checkpoint(tmp_path) == ckpts / "step_1"
    # the previous checkpoint resumes exactly: step 2 from it equals the uninterrupted step 2
    reference = run_ranks(small_model, tmp_path / "ref", 1)
    resumed = run_ranks(small_model, tmp_path / "resumed", 1, mode=f"from:{ckpts / 'step_1'}")
    assert resumed[1]["loss"] == reference[1]["loss"]
    assert_same_weights(
        load_file(tmp_path / "resumed" / "weights.safetensors"),
        load_file(tmp_path / "ref" / "weights.safetensors"),
        atol=0,
    )
    # retention: the partial one is deleted, the complete one kept
    assert prune_checkpoints(ckpts, keep=1) == [ckpts / "step_2.partial"]
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_1"]

"""A 3-step `microcoder launch` with `learner.lora.rank = 8` on the tiny model (issue 47): the
learner trains the adapter alone, rank 0 publishes it and the vLLM-CPU generator serves each
version as a LoRA adapter (actors/engines/adapters.py). The run ends with exit 0, every step
reports a finite loss and a reward, and the generator logs adapter syncs, without a pause, of
newer and newer versions. The random model fails every problem, so the steps train on
unfiltered groups (advantage 0: the loss is 0, the reward 0). (The engine's greedy equality and in-flight versions: tests/actors/test_lora_engine.py.)"""

from __future__ import annotations

import math
import re

import pytest
from launch_testing.launched import SMALL_RUN, launch_tiny, metrics_records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LOADED = re.compile(r"adapter v(\d+) loaded \(\d+ bytes, [\d.]+ s, no pause\); serving")


def test_a_lora_launch_trains_three_steps_with_a_finite_loss_and_a_reward(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    settings = [
        *SMALL_RUN,
        "max_steps=3",
        "learner.lora.rank=8",
        "learner.batch_size=2",
        "algorithm.dynamic_filtering=true",
        "algorithm.all_filtered_patience=1",
        'algorithm.all_filtered_action="train-unfiltered"',  # a random model fails every problem
        "algorithm.temperature.calibrate=false",
        "generator.enforce_eager=true",  # no torch.compile: the engine starts sooner
        "learner.checkpoint_every=0",
    ]
    proc = launch_tiny(run_dir, tiny_model_dir, settings, 840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = metrics_records(run_dir, "step")
    assert [r["step"] for r in steps] == [1, 2, 3]
    for r in steps:
        assert math.isfinite(r["loss"]), r
        assert math.isfinite(r["reward_mean"]), r
    log = (run_dir / "logs" / "generator-0.log").read_text()
    loaded = [int(v) for v in LOADED.findall(log)]  # actors/weights/follower.py's line
    assert loaded and loaded == sorted(loaded) and loaded[-1] >= 2, log[-3000:]

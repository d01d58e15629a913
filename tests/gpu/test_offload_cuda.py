"""learner.offload on CUDA (one rank, bf16 compute): the streamed moments are pinned host buffers
and the weights equal no offload bit for bit (the same CUDA AdamW, a bucket at a time); with
"params" the shards live in pinned host memory and two steps train. The CPU tests
(tests/learner/test_offload*.py) cover the rest; this checks pinning, non_blocking copies and
FSDP2's CPU offload where they are real. Not yet run on a GPU (written without one)."""

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

WORKER = Path(__file__).resolve().parents[1] / "learner" / "offload_worker.py"


def run_one(model: Path, out: Path, offload: str) -> tuple[dict, dict]:
    """One CUDA rank of train_worker.py (two bf16 steps) with `offload`: its placement record
    and published weights."""
    assert torch.cuda.is_available(), "tests/gpu needs a CUDA GPU"
    out.mkdir(parents=True)
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    env |= {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    extra = json.dumps({"learner": {"dtype": "bfloat16", "offload": offload}})
    cmd = [sys.executable, str(WORKER), str(model), str(out), "train", "4096", extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    placement = json.loads((out / "offload0.json").read_text())
    return placement, load_file(out / "weights.safetensors")


@pytest.mark.timeout(900)
def test_offload_on_cuda_keeps_state_on_the_host_and_streamed_weights_bit_equal(
    tiny_model_dir, tmp_path
):
    _, plain = run_one(tiny_model_dir, tmp_path / "none", "none")
    placement, streamed = run_one(tiny_model_dir, tmp_path / "optimizer", "optimizer")
    assert placement == {"moments_on_host": True, "params_on_host": False}  # pinned, ours
    assert streamed.keys() == plain.keys()
    assert all(torch.equal(streamed[k], plain[k]) for k in plain)
    placement, hosted = run_one(tiny_model_dir, tmp_path / "params", "params")
    assert placement == {"moments_on_host": False, "params_on_host": True}
    assert all(torch.isfinite(v.float()).all() for v in hosted.values())
    for k in plain:  # the host AdamW (CPU kernels) may round differently from the CUDA one
        torch.testing.assert_close(hosted[k].float(), plain[k].float(), atol=1e-2, rtol=1e-2)

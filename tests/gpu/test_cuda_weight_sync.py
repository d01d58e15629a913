"""The weight broadcast between CUDA processes: NCCL when sender and receiver are on different
GPUs, gloo over CPU copies when they share one (NCCL refuses two ranks on one GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from microcoder.learner.distributed import free_port
from microcoder.learner.sync.transport import WeightSender

pytestmark = pytest.mark.gpu

RECEIVER = Path(__file__).with_name("cuda_receiver.py")


def weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "embed.weight": torch.randn(4096, 256, generator=g).to(torch.bfloat16),  # 2 MiB: alone
        "layer.0.q.weight": torch.randn(256, 256, generator=g),
        "layer.0.q.bias": torch.randn(256, generator=g),
        "norm.weight": torch.randn(256, generator=g).half(),
    }


@pytest.mark.timeout(300)
def test_a_cuda_receiver_gets_bit_identical_weights_over_nccl_or_gloo_on_a_shared_gpu(tmp_path):
    gpus = torch.cuda.device_count()
    assert gpus >= 1, "tests/gpu needs a CUDA GPU (run with -m 'not gpu' elsewhere)"
    receiver_gpu = gpus - 1  # another GPU when there is one: the NCCL path
    port, out = free_port(), tmp_path / "rx.safetensors"
    proc = subprocess.Popen(
        [sys.executable, str(RECEIVER), "127.0.0.1", str(port), f"cuda:{receiver_gpu}", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    torch.cuda.set_device(0)
    sender = WeightSender(
        "127.0.0.1", port, num_receivers=1, timeout_s=120, bucket_bytes=1 << 20, device="cuda:0"
    )
    sent = weights(0)
    stats = sender.send(sent.items(), version=3)
    assert proc.wait(timeout=180) == 0, proc.stdout.read().decode()[-3000:]
    backend = sender.store.get("microcoder-weights/backend").decode()
    assert backend == ("nccl" if gpus > 1 else "gloo")
    assert sender.device.type == ("cuda" if gpus > 1 else "cpu")
    got = load_file(out)
    assert stats.tensors == len(sent) and got.keys() == sent.keys()
    for k, v in sent.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
    with safe_open(out, "pt") as f:
        meta = f.metadata()
    assert meta["version"] == "3"
    assert meta["devices"] == (f"cuda:{receiver_gpu}" if gpus > 1 else "cpu")

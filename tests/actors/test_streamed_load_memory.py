"""actors/engines/worker_ext.py `mc_receive_and_load` loads the weights bucket by bucket as they arrive:
the memory a sync adds above the loaded model is O(bucket), not a second copy of the model
(issue 33, fault 1). The receiver holds the bucket being loaded and the next one; gloo may hold
one more that arrived before the receiver posted it (measured 1.5 to 2.8 buckets on the 2-core
machine; before the fix, all 16 of 16: the whole model).

Measured as the process's peak resident memory (VmHWM, reset through /proc/self/clear_refs,
big allocations each in their own mapping) over one sync of a 32 MiB model in buckets of 2 MiB
(two tensors each) and 1 MiB (one), over a real gloo channel (the sender on a thread of this
process, so its staging buffers are counted too). A unit test: the vLLM worker is a stand-in
whose `reload_weights` copies each tensor into a torch model as it comes, as vLLM's loader
does."""

from __future__ import annotations

import re
import threading
from types import SimpleNamespace

import pytest
import torch

from microcoder.actors.engines.worker_ext import WeightLoaderExtension
from microcoder.learner.distributed import free_port
from microcoder.learner.sync.transport import WeightReceiver, WeightSender

BUCKET = 2 << 20
LAYERS = 32  # 32 x 1 MiB = 32 MiB of fp32 weights, 16 or 32 buckets


class StandInWorker(WeightLoaderExtension):
    """What the extension's methods use of vLLM's Worker: `reload_weights`, the device, the
    model (its config, and its modules: none is a fused-MoE layer to prepack)."""

    def __init__(self, model: torch.nn.Module):
        model.config = SimpleNamespace(tie_word_embeddings=False)
        self.model_runner = SimpleNamespace(model=model)
        self.device_config = SimpleNamespace(device=torch.device("cpu"))
        self.params = dict(model.named_parameters())

    def reload_weights(self, weights_iterator, is_checkpoint_format: bool) -> None:
        assert is_checkpoint_format
        with torch.no_grad():
            for name, tensor in weights_iterator:
                self.params[name].copy_(tensor)


def memory_kib() -> tuple[int, int]:
    """(peak resident since the last reset, resident now) of this process, KiB."""
    status = open("/proc/self/status").read()
    return tuple(int(re.search(rf"{k}:\s+(\d+)", status).group(1)) for k in ("VmHWM", "VmRSS"))


def map_big_allocations() -> None:
    """Make glibc serve every allocation of 64 KiB or more with its own mapping, returned to the
    system when freed (mallopt M_MMAP_THRESHOLD; a fixed threshold also turns off glibc's
    raising of it), so resident memory follows the bucket buffers alive, not the heap's reuse."""
    import ctypes

    m_mmap_threshold = -3
    assert ctypes.CDLL("libc.so.6").mallopt(m_mmap_threshold, 64 << 10) == 1


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def states(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(v.shape, generator=g) for k, v in model.state_dict().items()}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("bucket", [BUCKET, BUCKET // 2], ids=["two-per-bucket", "one-per-bucket"])
def test_a_sync_adds_at_most_two_buckets_above_the_loaded_model(bucket: int):
    map_big_allocations()
    model = torch.nn.Sequential(*(torch.nn.Linear(512, 512, bias=False) for _ in range(LAYERS)))
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    worker, port = StandInWorker(model), free_port()
    built: dict = {}
    bring_up = threading.Thread(
        target=lambda: built.update(
            sender=WeightSender("127.0.0.1", port, 1, timeout_s=60, bucket_bytes=bucket)
        )
    )
    bring_up.start()
    worker._mc_receiver = WeightReceiver("127.0.0.1", port, 1, 2, timeout_s=60, name="gen-mem")
    bring_up.join(60)
    sender = built["sender"]

    def sync(state: dict, version: int) -> tuple[int, int, float, float]:
        send = threading.Thread(target=sender.send, args=(state.items(), version))
        send.start()
        try:
            return worker.mc_receive_and_load()
        finally:
            send.join(60)

    sync(states(model, 0), 1)  # warm: the sender's staging buffers, gloo's pairs
    new = states(model, 1)
    reset_peak()
    peak_before, rss_before = memory_kib()
    version, count, _, _ = sync(new, 2)
    peak, _ = memory_kib()
    extra = (max(peak, peak_before) - rss_before) * 1024
    print(
        f"model {model_bytes >> 10} KiB, bucket {bucket >> 10} KiB: "
        f"peak extra resident memory {extra >> 10} KiB ({extra / bucket:.2f} buckets)"
    )
    assert (version, count) == (2, LAYERS)
    for name, param in model.named_parameters():
        assert torch.equal(param.detach(), new[name]), name
    assert model_bytes >= 16 * bucket
    assert extra <= 3.5 * bucket, (
        f"a sync added {extra >> 10} KiB above the loaded model ({model_bytes >> 10} KiB, "
        f"buckets of {bucket >> 10} KiB): the receiver holds more than the bucket it loads "
        "the next and the one on the wire"
    )

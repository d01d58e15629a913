"""Weight broadcast over the stateless gloo group into separate receiver processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from microcoder.learner.distributed import free_port
from microcoder.learner.sync.transport import (
    WeightSender,
    WeightSyncError,
    bucket_layout,
    channel_backend,
    wait_keys,
)

RECEIVER = Path(__file__).with_name("sync_receiver.py")


def start_receiver(port: int, rank: int, world: int, out: Path, rounds: int) -> subprocess.Popen:
    cmd = [
        sys.executable,
        str(RECEIVER),
        "127.0.0.1",
        str(port),
        str(rank),
        str(world),
        str(out),
        str(rounds),
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@contextmanager
def receiver_logs_on_failure(procs: list[subprocess.Popen]) -> Iterator[None]:
    """A sender-side failure shows each receiver's own output (why a receiver died), which the
    sender's error cannot: the receivers are killed and their logs printed before it is raised
    (seen once under load: "rank 1 died before it could confirm round 1", its log unread)."""
    try:
        yield
    except BaseException:
        for rank, p in enumerate(procs, start=1):
            p.kill()
            print(f"--- receiver {rank} (exit {p.wait()}) ---\n{p.stdout.read().decode()[-3000:]}")
        raise


def state_dict(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "embed.weight": torch.randn(300, 64, generator=g),  # 76.8 kB: alone in its bucket
        "layer.0.q.weight": torch.randn(64, 64, generator=g).to(torch.bfloat16),
        "layer.0.q.bias": torch.randn(64, generator=g),
        "layer.0.scale": torch.tensor(3.5),
        "step": torch.tensor([7, 8, 9], dtype=torch.int64),
        "transposed": torch.randn(8, 16, generator=g).t(),  # not contiguous
        "lm_head.weight": torch.randn(300, 64, generator=g).half(),
    }


def test_layout_buckets_respect_the_size_and_isolate_big_tensors():
    items = list(state_dict(0).items())
    header, buckets = bucket_layout(items, 5, bucket_bytes=16 << 10)
    assert sorted(i for b in buckets for i in b["members"]) == list(range(len(items)))
    for b in buckets:
        assert len(b["members"]) == 1 or b["nbytes"] <= 16 << 10
    assert header.version == 5 and len(header.tensors) == len(items)


@pytest.mark.timeout(180)
def test_broadcast_delivers_bit_identical_tensors_to_every_receiver(tmp_path):
    port, world = free_port(), 3
    outs = [tmp_path / f"rx{r}.safetensors" for r in (1, 2)]
    procs = [start_receiver(port, r, world, outs[r - 1], rounds=2) for r in (1, 2)]
    sent = state_dict(1)
    with receiver_logs_on_failure(procs):
        sender = WeightSender("127.0.0.1", port, 2, timeout_s=60, bucket_bytes=16 << 10)
        sender.send(state_dict(0).items(), version=1)
        stats = sender.send(sent.items(), version=2)
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stdout.read().decode()[-3000:]
    assert stats.buckets > 2 and stats.tensors == len(sent)
    for out in outs:
        got = load_file(out)
        assert got.keys() == sent.keys()
        for k, v in sent.items():
            assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
        with safe_open(out, "pt") as f:
            assert f.metadata()["version"] == "2"


class KeyLandsAtTheSecondCheck:
    """A store whose key is missing at the first check and set from the second on: a receiver
    that confirmed its last round in the moment between the sender's check and its look at the
    link, then exited (its link closed)."""

    def __init__(self) -> None:
        self.checks = 0

    def check(self, keys: list[str]) -> bool:
        self.checks += 1
        return self.checks > 1


def test_a_receiver_that_confirms_and_exits_at_once_is_not_called_dead():
    """The race `make test` hit once under load (the bit-identical test above: "rank 1 died
    before it could confirm round 1" after its last round): a closed link whose rank's key is set
    by then is a confirmation, not a death."""
    store = KeyLandsAtTheSecondCheck()
    wait_keys(store, {1: "done/1/1"}, {1: "gen"}, "confirm round 1", 5.0, lambda ranks: ranks)
    assert store.checks >= 2


@pytest.mark.timeout(120)
def test_dead_receiver_raises_an_error_naming_it(tmp_path):
    port = free_port()
    proc = start_receiver(port, 1, 2, tmp_path / "unused", rounds=0)  # joins, then exits
    # It may die while the sender still builds the group (a loaded machine) or before the send:
    # either way the sender's error names it.
    with pytest.raises(WeightSyncError, match="rank 1 \\(test-generator-1\\)"):
        sender = WeightSender("127.0.0.1", port, num_receivers=1, timeout_s=3, join_timeout_s=60)
        proc.wait(timeout=60)
        sender.send(state_dict(0).items(), version=1)


@pytest.mark.timeout(120)
def test_receiver_that_never_joins_is_named_at_bring_up():
    with pytest.raises(WeightSyncError, match="rank 1 \\(never joined\\)"):
        WeightSender("127.0.0.1", free_port(), num_receivers=1, timeout_s=2)


@pytest.mark.timeout(180)
def test_a_sender_without_a_count_serves_as_many_receivers_as_they_declare(tmp_path):
    """A tensor-parallel engine's workers (ranks 1, 2) declare a world of 3; the learner's
    sender does not know the engine's size and takes it from them."""
    port, world = free_port(), 3
    outs = [tmp_path / f"tp{r}.safetensors" for r in (1, 2)]
    procs = [start_receiver(port, r, world, outs[r - 1], rounds=1) for r in (1, 2)]
    sender = WeightSender("127.0.0.1", port, num_receivers=None, timeout_s=60)
    assert sender.world == world and set(sender.names) == {1, 2}
    sent = state_dict(2)
    sender.send(sent.items(), version=4)
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stdout.read().decode()[-3000:]
    for out in outs:
        got = load_file(out)
        assert all(torch.equal(got[k], v) for k, v in sent.items())


@pytest.mark.timeout(120)
def test_a_receiver_of_another_group_size_is_named_at_bring_up(tmp_path):
    port = free_port()
    proc = start_receiver(port, 1, 3, tmp_path / "unused", rounds=0)  # believes in 3 ranks
    try:
        with pytest.raises(
            WeightSyncError, match="rank 1 \\(test-generator-1\\) joined a group of 3"
        ):
            WeightSender("127.0.0.1", port, num_receivers=1, timeout_s=60)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_nccl_only_when_every_rank_has_its_own_gpu():
    assert channel_backend("gpu-a", ["gpu-b", "gpu-c"]) == "nccl"
    assert channel_backend("gpu-a", ["gpu-a"]) == "gloo"  # one GPU shared: NCCL refuses
    assert channel_backend("gpu-a", ["gpu-b", "gpu-b"]) == "gloo"  # two TP workers on one GPU
    assert channel_backend("gpu-a", [""]) == "gloo"  # a CPU receiver
    assert channel_backend("", ["", ""]) == "gloo"  # the CPU machines

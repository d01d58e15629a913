"""The chain relay (learner/sync/relay.py): real gloo groups on loopback, the receivers in
threads of this process (each with its own group member), the sender in the test's thread."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from microcoder.learner.distributed import free_port
from microcoder.learner.sync.relay import (
    RelayError,
    RelayReceiver,
    RelaySender,
    relay_layout,
)
from microcoder.learner.sync.transport import WeightSyncError

MEMBER = Path(__file__).with_name("relay_member.py")
BUCKET = 64 << 10  # 64 KiB chunks
DEADLINE_S = 3.0


def state(seed: int) -> dict[str, torch.Tensor]:
    """Mixed dtypes, a tensor of 5 chunks, a non-contiguous one, a 0-d and an empty one."""
    g = torch.Generator().manual_seed(seed)
    return {
        "embed.weight": torch.randn(1280, 64, generator=g),  # 320 KiB fp32: split over chunks
        "q.weight": torch.randn(64, 64, generator=g).to(torch.bfloat16),
        "q.bias": torch.randn(64, generator=g),
        "scale": torch.tensor(3.5),
        "step": torch.tensor([7, 8, 9], dtype=torch.int64),
        "transposed": torch.randn(8, 16, generator=g).t(),
        "empty": torch.zeros(0, 4),
        **{f"layer.{i}.w": torch.randn(100, 50, generator=g).half() for i in range(12)},
    }


class Chain:
    """A relay sender and N receivers joined on one port; `run(state)` sends a round while
    every receiver collects its tensors (clones) in a thread."""

    def __init__(self, n: int, cls=RelayReceiver, ranks: list[int] | None = None, **kw):
        self.port, self.n, self.rx, self.errors = free_port(), n, {}, {}
        threads = [
            threading.Thread(target=self._join, args=(r, cls), daemon=True)
            for r in (ranks or range(1, n + 1))
        ]
        for t in threads:
            t.start()
        try:
            self.sender = RelaySender(
                "127.0.0.1",
                self.port,
                n,
                timeout_s=DEADLINE_S,
                join_timeout_s=kw.pop("join", 60),
                bucket_bytes=BUCKET,
                **kw,
            )
        finally:
            for t in threads:
                t.join(60)

    def _join(self, r: int, cls) -> None:
        try:
            self.rx[r] = cls(
                "127.0.0.1", self.port, r, self.n + 1, timeout_s=DEADLINE_S, name=f"gen-{r}"
            )
        except WeightSyncError as err:  # the sender gave up on a missing peer
            self.errors[r] = err

    def run(self, sent: dict, version: int = 1, **kw):
        got: dict[int, dict] = {}

        def take(r: int) -> None:
            try:
                got[r] = {k: v.clone() for k, v in self.rx[r].receive()}
            except Exception as err:
                self.errors[r] = err

        threads = [threading.Thread(target=take, args=(r,), daemon=True) for r in self.rx]
        for t in threads:
            t.start()
        try:
            return self.sender.send(sent.items(), version, **kw), got
        finally:
            for t in threads:
                t.join(30)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_relay_delivers_bit_identical_tensors_to_every_receiver(n):
    chain = Chain(n)
    sent = state(n)
    stats, got = chain.run(sent, version=4)
    assert not chain.errors
    assert (
        stats.chunks >= 6
        and stats.bucket_bytes == BUCKET
        and set(stats.receivers) == set(range(1, n + 1))
    )
    for r in range(1, n + 1):
        assert list(got[r]) == list(sent)  # the sender's order
        for k, v in sent.items():
            assert got[r][k].dtype == v.dtype and got[r][k].shape == v.shape, (r, k)
            assert torch.equal(got[r][k], v), (r, k)
        assert chain.rx[r].version == 4 and chain.rx[r].stats["fp"] == stats.fingerprint


@pytest.mark.timeout(120)
def test_the_serving_dtype_casts_floating_tensors_on_the_wire_and_keeps_integers():
    chain = Chain(2, dtype=torch.bfloat16)
    sent = state(0)
    stats, got = chain.run(sent)
    for r in (1, 2):
        for k, v in sent.items():
            want = v.to(torch.bfloat16) if v.is_floating_point() else v
            assert got[r][k].dtype == want.dtype and torch.equal(got[r][k], want), k
    assert stats.bytes < sum(t.numel() * t.element_size() for t in sent.values())


def test_layout_chunks_are_fixed_and_only_tensors_bigger_than_a_chunk_straddle():
    items = list(state(0).items())
    header = relay_layout(items, 1, BUCKET)
    c = header["chunk"]
    for name, dtype, shape, off in header["tensors"]:
        nbytes = torch.zeros(shape, dtype=getattr(torch, dtype)).nbytes
        assert off % 64 == 0
        if 0 < nbytes <= c:
            assert off // c == (off + nbytes - 1) // c, name
    assert header["total"] > 5 * c


class CorruptAtLast(RelayReceiver):
    """Flips one byte of chunk 2 as it arrives, before forwarding it (a bad link)."""

    corrupt_rank = 3

    def _forward(self, buf):
        self._seen = getattr(self, "_seen", 0) + 1
        if self.rank == self.corrupt_rank and self._seen == 4:  # header size, header, chunk 0, 1
            buf[10] ^= 0xFF
        return super()._forward(buf)


@pytest.mark.timeout(120)
def test_a_receiver_that_got_other_bytes_is_named_and_the_others_delivered():
    chain = Chain(3, cls=CorruptAtLast)
    with pytest.raises(RelayError) as info:
        chain.run(state(1))
    msg = str(info.value)
    assert "rank 3 (gen-3)" in msg and "received other bytes" in msg, msg
    assert "rank 1" not in msg and "rank 2" not in msg
    assert info.value.delivered == [1, 2] and list(info.value.failed) == [3]


@pytest.mark.timeout(120)
def test_corruption_in_the_middle_of_the_chain_names_it_and_every_receiver_after_it():
    CorruptAtLast.corrupt_rank = 2
    try:
        chain = Chain(3, cls=CorruptAtLast)
        with pytest.raises(RelayError) as info:
            chain.run(state(1))
    finally:
        CorruptAtLast.corrupt_rank = 3
    msg = str(info.value)
    assert "chain broke at rank 2 (gen-2)" in msg and "downstream of it rank 3 (gen-3)" in msg
    assert info.value.delivered == [1]


@pytest.mark.timeout(120)
def test_a_receiver_that_never_joins_is_named_at_the_deadline():
    with pytest.raises(WeightSyncError) as info:
        Chain(3, ranks=[1, 3], join=2.0)
    assert "rank 2 (never joined)" in str(info.value)


@pytest.mark.timeout(180)
def test_a_member_that_dies_breaks_the_chain_for_those_after_it_and_is_named(tmp_path):
    """Receivers in their own processes; rank 2 exits mid-round (its connections close)."""
    port, sent = free_port(), state(3)
    cmd = [sys.executable, str(MEMBER), "127.0.0.1", str(port)]
    procs = {
        r: subprocess.Popen([*cmd, str(r), "4", "2" if r == 2 else "-1", str(tmp_path / f"{r}")])
        for r in (1, 2, 3)
    }
    try:
        sender = RelaySender(
            "127.0.0.1", port, 3, timeout_s=5, join_timeout_s=120, bucket_bytes=BUCKET
        )
        with pytest.raises(RelayError) as info:
            sender.send(sent.items(), 1)
        codes = {r: p.wait(60) for r, p in procs.items()}
    finally:
        for p in procs.values():
            p.kill()
    msg = str(info.value)
    assert "chain broke at rank 2 (gen-2)" in msg, msg
    assert "downstream of it rank 3 (gen-3) did not get version 1" in msg, msg
    assert "upstream" not in msg, msg
    assert info.value.delivered == [1]  # upstream of the break the round completed
    assert codes == {1: 0, 2: 3, 3: 1}  # rank 3 gave up at its own deadline
    got = json.loads((tmp_path / "1").read_text())
    assert got["sums"] == {k: float(v.double().sum()) for k, v in sent.items()}
    assert got["stats"]["forward_error"].startswith("to rank 2")


class Stops(RelayReceiver):
    """Rank 2 takes the header and two chunks, then stops receiving but stays in the group."""

    def _wait_recv(self, work, n, what):
        if self.rank == 2 and what == "chunk 2":
            raise RuntimeError("this member stopped")
        return super()._wait_recv(work, n, what)


@pytest.mark.timeout(120)
def test_a_stuck_member_is_named_and_the_stall_it_causes_upstream_is_said():
    chain = Chain(3, cls=Stops)
    t0 = time.monotonic()
    with pytest.raises(RelayError) as info:
        chain.run(state(2))
    took = time.monotonic() - t0
    msg = str(info.value)
    assert "chain broke at rank 2 (gen-2)" in msg, msg
    assert "downstream of it rank 3 (gen-3) did not get version 1" in msg, msg
    assert "upstream of it rank 1 (gen-1) lost the round too" in msg, msg
    assert took < 3 * DEADLINE_S  # rank 0's send deadline, then its confirm deadline at most


@pytest.mark.timeout(120)
def test_the_receiver_holds_at_most_two_chunks_above_the_model_and_the_sender_two_buffers():
    """Tensors no bigger than a chunk: a receiver that loads each as it comes (here: copies it
    into its model and drops it) holds at most two chunk buffers; the sender its two staging
    buffers, whatever the number of receivers."""
    sent = {f"w{i}": torch.full((4096,), float(i)) for i in range(64)}  # 64 x 16 KiB = 16 chunks
    peaks = {}
    for n in (1, 3):
        chain = Chain(n)
        stats, _ = chain.run(sent)
        peaks[n] = stats.sender_peak_extra_bytes
        assert stats.chunks == 16
        assert 0 < stats.receiver_peak_extra_bytes <= 2 * BUCKET, stats.receivers
    assert peaks[1] == peaks[3] == 2 * BUCKET


@pytest.mark.timeout(120)
def test_tensors_bigger_than_a_chunk_are_reassembled_one_at_a_time():
    """Two adjacent tensors of 3.5 chunks each between small ones: the receiver holds its two
    chunks plus the split tensor it fills; the caller may still hold the one it was handed."""
    big = 7 * BUCKET // 8  # elements of fp32: 3.5 chunks
    sent = {
        "a": torch.arange(1000.0),
        "big1": torch.arange(big, dtype=torch.float32),
        "big2": -torch.arange(big, dtype=torch.float32),
        "b": torch.ones(10, dtype=torch.int64),
    }
    chain = Chain(2)
    stats, got = chain.run(sent)
    for r in (1, 2):
        assert all(torch.equal(got[r][k], v) for k, v in sent.items())
    assert stats.receiver_peak_extra_bytes <= 2 * BUCKET + 2 * big * 4, stats.receivers
    assert stats.sender_peak_extra_bytes == 2 * BUCKET  # no whole-tensor copy on the sender
    print({r: rep["peak"] / BUCKET for r, rep in stats.receivers.items()})


@pytest.mark.timeout(120)
def test_with_drop_missing_a_member_not_ready_is_left_out_and_the_chain_closes_over_it():
    """Rank 2 joined the group but does not receive this round: with `drop_missing` rank 0
    sends to 1 and 3 (chain 1 -> 3) after the ready deadline; without it the round fails
    naming rank 2. Rank 2, arriving late, is told it was left out."""
    chain = Chain(3)
    late = chain.rx.pop(2)
    sent = state(5)
    stats, got = chain.run(sent, version=7, drop_missing=True)
    assert stats.skipped == [2] and set(stats.receivers) == {1, 3}
    for r in (1, 3):
        assert all(torch.equal(got[r][k], v) for k, v in sent.items())
    with pytest.raises(WeightSyncError) as info:
        list(late.receive())
    assert "left out of the round" in str(info.value)
    chain.rx[2] = late  # all three again: the next round reaches everyone
    stats, got = chain.run(sent, version=8)
    assert stats.skipped == [] and all(torch.equal(got[2][k], v) for k, v in sent.items())

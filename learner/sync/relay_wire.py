"""The wire format and bookkeeping of the weight relay (learner/sync/relay.py): the stream
layout and its chunks, packing a chunk and unpacking a split tensor, the fingerprint, the
memory meter, and the round's stats and error. Only torch is imported (a vLLM worker imports it).

Layout (`relay_layout`): tensors in the caller's order at 64-byte aligned offsets of the stream;
a tensor that fits in a chunk never straddles two (it starts the next chunk instead), a tensor
bigger than a chunk is split across consecutive chunks. Every chunk but the last is exactly
`bucket_bytes` long.

Memory, bounded by the chunk size and independent of the model's size and of N:
- sender: two staging buffers of `bucket_bytes` (pinned host memory when the group is gloo and
  a tensor is on CUDA, device memory on NCCL), packed in turn; a chunk is packed by copying each
  tensor's slice into the buffer viewed as the serving dtype (the cast is that copy: no
  whole-tensor copy, whatever its size);
- receiver: the chunk being loaded (also the one being forwarded) and the next one being
  received, plus, while a tensor bigger than a chunk arrives, that one tensor's buffer (it is
  yielded whole once its last chunk arrived: the receiver fills one such buffer at a time; the
  caller may still hold the one it was handed before, so 2 chunks + 2 split tensors at worst,
  measured by tests/learner/test_weight_relay.py).
Small tensors are yielded as views into their chunk's buffer (no copy). Both ends count the
bytes of the buffers they allocate while they are alive (`Meter`), and on CUDA also the peak
of `torch.cuda.max_memory_allocated` over the round; `RelayStats` reports them.

Same bytes: every receiver fingerprints the chunks it received, in order, and reports it with
its done key; rank 0 fingerprints the chunks it sent and raises naming every receiver whose
fingerprint differs. On CPU chunks (gloo) the fingerprint is the CRC-32 of the whole byte
stream (zlib, about 3 GB/s here, cheaper than one copy of the chunk) and the stream's length;
on CUDA chunks (NCCL) a 64-bit wrapping sum of each chunk's int64 words, chained across chunks
in order, computed on the device (one host sync per round): it catches a corrupted, missing or
misordered chunk, not two words swapped inside one chunk.

Public surface, used by learner/sync/relay.py only: `Meter`, `Fingerprint`, `FlatCache`,
`relay_layout` and per header `chunk_count` / `chunk_spans`, `entry_nbytes` of one tensor entry,
`pack_chunk` / `unpack_split`, and `RelayStats`, `RelayError`, `chain_error`.
"""

from __future__ import annotations

import math
import weakref
import zlib
from dataclasses import dataclass, field

import torch

from microcoder.learner.sync.transport import ALIGN, WeightSyncError


class RelayError(WeightSyncError):
    """A relay round did not reach every receiver with the same bytes. `delivered`: the ranks
    that confirmed the round with rank 0's fingerprint; `failed`: {rank: why} for the others."""

    def __init__(self, message: str, delivered: list[int], failed: dict[int, str]):
        super().__init__(message)
        self.delivered = delivered
        self.failed = failed


@dataclass
class RelayStats:
    """What one `RelaySender.send` moved, and the memory both ends held above the model."""

    version: int
    tensors: int
    chunks: int
    bytes: int
    bucket_bytes: int
    seconds: float
    fingerprint: str
    sender_peak_extra_bytes: int
    receiver_peak_extra_bytes: int
    receivers: dict[int, dict] = field(default_factory=dict)
    """Each receiver's report: its peak bytes, seconds waiting for chunks, forward error."""
    skipped: list[int] = field(default_factory=list)
    """Receivers left out of the round (not ready in time, `send(drop_missing=True)`)."""


class Meter:
    """Bytes of the buffers this end allocated that are still alive, and their peak."""

    def __init__(self) -> None:
        self.now = self.peak = 0

    def empty(self, nbytes: int, device: torch.device, pin: bool = False) -> torch.Tensor:
        buf = torch.empty(nbytes, dtype=torch.uint8, device=device, pin_memory=pin)
        self.now += nbytes
        self.peak = max(self.peak, self.now)
        weakref.finalize(buf, self._free, nbytes)
        return buf

    def _free(self, nbytes: int) -> None:
        self.now -= nbytes


class Fingerprint:
    """Of a chunk stream, in order (see the module docstring for the two kinds)."""

    def __init__(self) -> None:
        self.crc = 0
        self.length = 0
        self.acc = None

    def update(self, chunk: torch.Tensor) -> None:
        self.length += chunk.numel()
        if chunk.is_cuda:
            s = chunk.view(torch.int64).sum()
            self.acc = s if self.acc is None else self.acc * 1000003 + s
        else:
            self.crc = zlib.crc32(memoryview(chunk.numpy()), self.crc)

    def hexdigest(self) -> str:
        if self.acc is not None:
            return f"sum64:{int(self.acc.item()) & (2**64 - 1):016x}:{self.length}"
        return f"crc32:{self.crc:08x}:{self.length}"


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def relay_layout(
    items: list[tuple[str, torch.Tensor]], version: int, bucket_bytes: int, dtype=None
) -> dict:
    """The round's header (JSON-able): each tensor's [name, serving dtype, shape, offset] in the
    byte stream, the stream's length and the chunk size. `dtype`: cast floating tensors to it
    (the serving dtype); None keeps each tensor's own."""
    chunk = bucket_bytes // ALIGN * ALIGN
    if chunk <= 0:
        raise ValueError(f"bucket_bytes must be at least {ALIGN}, got {bucket_bytes}")
    entries = []
    pos = 0
    for name, t in items:
        dt = dtype if dtype is not None and t.is_floating_point() else t.dtype
        nbytes = t.numel() * torch.empty((), dtype=dt).element_size()
        pos = _align(pos)
        if nbytes <= chunk and pos % chunk + nbytes > chunk:  # fits in one chunk: never straddle
            pos = -(-pos // chunk) * chunk
        entries.append([name, str(dt).removeprefix("torch."), list(t.shape), pos])
        pos += nbytes
    total = max(_align(pos), ALIGN)
    return {"version": version, "chunk": chunk, "total": total, "tensors": entries}


def entry_nbytes(entry: list) -> int:
    return math.prod(entry[2]) * torch.empty((), dtype=getattr(torch, entry[1])).element_size()


def chunk_count(header: dict) -> int:
    return -(-header["total"] // header["chunk"])


def chunk_spans(header: dict) -> list[tuple[int, int]]:
    """(first chunk, last chunk) of each tensor (a tensor of 0 bytes: the chunk it sits in)."""
    c = header["chunk"]
    last = chunk_count(header) - 1
    out = []
    for entry in header["tensors"]:
        off = entry[3]
        n = entry_nbytes(entry)
        out.append((min(off // c, last), min((off + max(n, 1) - 1) // c, last)))
    return out


class FlatCache:
    """Each tensor as a flat view; a non-contiguous one is made contiguous once (kept while its
    chunks are packed: one tensor at a time)."""

    def __init__(self, items: list) -> None:
        self.items = items
        self.i = -1
        self.flat = None

    def get(self, i: int) -> torch.Tensor:
        if i != self.i:
            self.flat = self.items[i][1].contiguous().reshape(-1)
            self.i = i
        return self.flat


def pack_chunk(buf: torch.Tensor, lo: int, hi: int, entry: list, flat: torch.Tensor) -> None:
    """Copy the part of tensor `entry` (its flat source `flat`) that lies in stream bytes
    [lo, hi) into `buf` (chunk bytes), cast to the serving dtype by the copy itself."""
    dt = getattr(torch, entry[1])
    off = entry[3]
    size = torch.empty((), dtype=dt).element_size()
    s = max(off, lo)
    e = min(off + flat.numel() * size, hi)
    if e <= s:
        return
    buf[s - lo : e - lo].view(dt).copy_(flat[(s - off) // size : (e - off) // size])


def unpack_split(dst: torch.Tensor, chunk: torch.Tensor, lo: int, off: int) -> None:
    """Copy the bytes of a split tensor (at stream offset `off`, `dst` its whole buffer) that
    lie in the chunk starting at stream byte `lo`."""
    s = max(off, lo)
    e = min(off + dst.numel(), lo + chunk.numel())
    if e > s:
        dst[s - off : e - off].copy_(chunk[s - lo : e - lo])


def chain_error(who, chain: list[int], failed: dict, reports: dict, n: int, version) -> RelayError:
    """The error of a relay round that did not reach everyone in `chain` (ranks in order).

    The chain broke at the first rank that the one before it could not forward to, else at
    the first that failed; the ranks after it did not get the version, and a stalled rank also
    stalls the ones before it (a send completes only once the next rank takes it), so those may
    have lost it too. `who(rank)` names a rank."""
    after = {r: chain[i + 1] for i, r in enumerate(chain[:-1])}
    could_not = [after[r] for r, rep in reports.items() if rep.get("forward_error") and r in after]
    first = min(could_not or failed, key=chain.index)
    pos = chain.index(first)
    down = [r for r in chain[pos + 1 :] if r in failed]
    up = [r for r in chain[:pos] if r in failed]
    lines = [f"{who(r)}: {why}" for r, why in sorted(failed.items())] + [
        f"{who(r)} could not forward: {rep['forward_error']}"
        for r, rep in sorted(reports.items())
        if rep.get("forward_error")
    ]
    msg = f"weight relay round {n} (version {version}): the chain broke at {who(first)}"
    if down:
        msg += f"; downstream of it {', '.join(map(who, down))} did not get version {version}"
    if up:
        msg += (
            f"; upstream of it {', '.join(map(who, up))} lost the round too (the stall reached it)"
        )
    msg += (
        f". Details: {'; '.join(lines)}. Check those generators' logs; raise "
        "learner.sync_timeout_s if they are only slow"
    )
    return RelayError(msg, [r for r in chain if r not in failed], failed)

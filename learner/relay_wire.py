"""The wire format and bookkeeping of the weight relay (learner/weight_relay.py): the stream
layout and its chunks, packing a chunk and unpacking a split tensor, the fingerprint, the
memory meter, and the round's stats and error. Only torch is imported (a vLLM worker imports it).
"""

from __future__ import annotations

import math
import weakref
import zlib
from dataclasses import dataclass, field

import torch

from microcoder.learner.weight_sync import _ALIGN, WeightSyncError


class RelayError(WeightSyncError):
    """A relay round did not reach every receiver with the same bytes. `delivered`: the ranks
    that confirmed the round with rank 0's fingerprint; `failed`: {rank: why} for the others."""

    def __init__(self, message: str, delivered: list[int], failed: dict[int, str]):
        super().__init__(message)
        self.delivered, self.failed = delivered, failed


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


class _Meter:
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


class _Fingerprint:
    """Of a chunk stream, in order (see the module docstring for the two kinds)."""

    def __init__(self) -> None:
        self.crc, self.length, self.acc = 0, 0, None

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
    return -(-n // _ALIGN) * _ALIGN


def relay_layout(
    items: list[tuple[str, torch.Tensor]], version: int, bucket_bytes: int, dtype=None
) -> dict:
    """The round's header (JSON-able): each tensor's [name, serving dtype, shape, offset] in the
    byte stream, the stream's length and the chunk size. `dtype`: cast floating tensors to it
    (the serving dtype); None keeps each tensor's own."""
    chunk = bucket_bytes // _ALIGN * _ALIGN
    if chunk <= 0:
        raise ValueError(f"bucket_bytes must be at least {_ALIGN}, got {bucket_bytes}")
    entries, pos = [], 0
    for name, t in items:
        dt = dtype if dtype is not None and t.is_floating_point() else t.dtype
        nbytes = t.numel() * torch.empty((), dtype=dt).element_size()
        pos = _align(pos)
        if nbytes <= chunk and pos % chunk + nbytes > chunk:  # fits in one chunk: never straddle
            pos = -(-pos // chunk) * chunk
        entries.append([name, str(dt).removeprefix("torch."), list(t.shape), pos])
        pos += nbytes
    total = max(_align(pos), _ALIGN)
    return {"version": version, "chunk": chunk, "total": total, "tensors": entries}


def _nbytes(entry: list) -> int:
    return math.prod(entry[2]) * torch.empty((), dtype=getattr(torch, entry[1])).element_size()


def _chunks(header: dict) -> int:
    return -(-header["total"] // header["chunk"])


def _spans(header: dict) -> list[tuple[int, int]]:
    """(first chunk, last chunk) of each tensor (a tensor of 0 bytes: the chunk it sits in)."""
    c, last = header["chunk"], _chunks(header) - 1
    out = []
    for entry in header["tensors"]:
        off, n = entry[3], _nbytes(entry)
        out.append((min(off // c, last), min((off + max(n, 1) - 1) // c, last)))
    return out


class _FlatCache:
    """Each tensor as a flat view; a non-contiguous one is made contiguous once (kept while its
    chunks are packed: one tensor at a time)."""

    def __init__(self, items: list) -> None:
        self.items, self.i, self.flat = items, -1, None

    def get(self, i: int) -> torch.Tensor:
        if i != self.i:
            self.i, self.flat = i, self.items[i][1].contiguous().reshape(-1)
        return self.flat


def _pack(buf: torch.Tensor, lo: int, hi: int, entry: list, flat: torch.Tensor) -> None:
    """Copy the part of tensor `entry` (its flat source `flat`) that lies in stream bytes
    [lo, hi) into `buf` (chunk bytes), cast to the serving dtype by the copy itself."""
    dt, off = getattr(torch, entry[1]), entry[3]
    size = torch.empty((), dtype=dt).element_size()
    s, e = max(off, lo), min(off + flat.numel() * size, hi)
    if e <= s:
        return
    buf[s - lo : e - lo].view(dt).copy_(flat[(s - off) // size : (e - off) // size])


def _unpack(dst: torch.Tensor, chunk: torch.Tensor, lo: int, off: int) -> None:
    """Copy the bytes of a split tensor (at stream offset `off`, `dst` its whole buffer) that
    lie in the chunk starting at stream byte `lo`."""
    s, e = max(off, lo), min(off + dst.numel(), lo + chunk.numel())
    if e > s:
        dst[s - off : e - off].copy_(chunk[s - lo : e - lo])

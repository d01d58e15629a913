"""Weights to N receivers at the cost of about one transfer: a pipelined chain relay (issue 33).

One stateless group over rank 0 (the learner) and every receiver (ranks 1..N), built as the
per-generator channel of learner/weight_sync.py is (`RelaySender` and `RelayReceiver` inherit
its bring-up: store, hello/world/backend keys, gloo or NCCL). The model travels as one byte
stream in the serving dtype, cut into fixed-size chunks of `bucket_bytes`: rank 0 sends chunk k
to rank 1 (point-to-point), rank i receives chunk k from rank i-1 and forwards it to rank i+1
(async) while its caller loads it. So a sync to N receivers takes about (B + N - 1) chunk times
for B chunks, where one channel per receiver sent in turn takes N x B.

Layout (learner/relay_wire.py `relay_layout`): tensors in the caller's order at 64-byte aligned offsets of the stream;
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
bytes of the buffers they allocate while they are alive (`_Meter`), and on CUDA also the peak
of `torch.cuda.max_memory_allocated` over the round; `RelayStats` reports them.

Same bytes: every receiver fingerprints the chunks it received, in order, and reports it with
its done key; rank 0 fingerprints the chunks it sent and raises naming every receiver whose
fingerprint differs. On CPU chunks (gloo) the fingerprint is the CRC-32 of the whole byte
stream (zlib, about 3 GB/s here, cheaper than one copy of the chunk) and the stream's length;
on CUDA chunks (NCCL) a 64-bit wrapping sum of each chunk's int64 words, chained across chunks
in order, computed on the device (one host sync per round): it catches a corrupted, missing or
misordered chunk, not two words swapped inside one chunk.

Round n: every receiver sets `relay-ready/{rank}/{n}`; rank 0 waits for all (names the missing),
sends an int64 header length and the JSON header down the chain, then the chunks; every
receiver ends with `relay-done/{rank}/{n}` (JSON: fingerprint, peak bytes, a forward error; or
{"why": ...} when its round failed). Every wait is bounded by `timeout_s` on both backends
(learner/collective_wait.py `wait_work`), so rank 0 gives up within 2 x timeout_s (its send,
then the receivers' keys). A receiver whose next rank died (gloo sees the closed connection at
once) stops forwarding but keeps receiving and loading (its own copy is good) and reports it. A
send completes only once the next rank takes it, so a member that is alive but stuck stalls the
ones before it too, and on gloo a timed-out wait closes the group's other connections: they
lose the round as well. Rank 0's `RelayError` names the member where the chain broke (the first
that a rank before it could not forward to, else the first that failed), the ranks downstream
that did not get the version and the ones upstream the stall reached (`.delivered`: the ranks
that confirmed it).

Built and bench-measured (`microcoder bench weight-sync --receivers 1,2,4`); not yet the run's
path: generators still get one channel each (actors/weight_sync.py). The design for the run:
notes/issue-33-h19.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta

import torch

from microcoder.learner.collective_wait import wait_work
from microcoder.learner.relay_wire import (
    RelayError,
    RelayStats,
    _chunks,
    _Fingerprint,
    _FlatCache,
    _Meter,
    _nbytes,
    _pack,
    _spans,
    _unpack,
    relay_layout,
)
from microcoder.learner.weight_sync import (
    _ALIGN,
    _PREFIX,
    WeightReceiver,
    WeightSender,
    WeightSyncError,
    _single_thread,
    _wait_keys,
)

__all__ = ["RelayError", "RelayReceiver", "RelaySender", "RelayStats", "relay_layout"]


class RelaySender(WeightSender):
    """Rank 0 of a relay group: sends each round down the chain 0 -> 1 -> ... -> N.

    Built like `WeightSender` (same arguments; its group is the chain's); `dtype` is the serving
    dtype floating tensors are cast to on the wire (None: as they are)."""

    def __init__(self, *args, dtype: torch.dtype | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dtype = dtype
        self.meter = _Meter()
        self._stage: list[torch.Tensor] = []

    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> RelayStats:
        """Send all tensors as weights of `version` to every receiver; returns the stats once
        every receiver confirmed the same bytes, else raises `RelayError` naming who did not."""
        start = time.perf_counter()
        n, self.round = self.round, self.round + 1
        items = [(name, t.detach()) for name, t in named_tensors]
        header = relay_layout(items, version, self.bucket_bytes, self.dtype)
        ranks = range(1, self.world)
        _wait_keys(
            self.store,
            {r: f"{_PREFIX}/relay-ready/{r}/{n}" for r in ranks},
            self.names,
            f"start receiving relay round {n}",
            self.timeout_s,
        )
        self._cuda_mark()
        fp, failure = _Fingerprint(), None
        try:
            self._send_header(header, n)
            self._send_chunks(items, header, fp, n)
        except RuntimeError as err:  # rank 1 dead or stalled (a stall downstream reaches it)
            failure = f"the send to it failed: {str(err)[:300]}"
        reports = self._confirm(n, version, fp.hexdigest(), failure)
        return RelayStats(
            version=version,
            tensors=len(items),
            chunks=_chunks(header),
            bytes=header["total"],
            bucket_bytes=header["chunk"],
            seconds=time.perf_counter() - start,
            fingerprint=fp.hexdigest(),
            sender_peak_extra_bytes=max(self.meter.peak, self._cuda_peak()),
            receiver_peak_extra_bytes=max(
                max(r["peak"], r.get("cuda_peak", 0)) for r in reports.values()
            ),
            receivers=reports,
        )

    def _cuda_mark(self) -> None:
        if self.device.type == "cuda":
            self._cuda_base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)

    def _cuda_peak(self) -> int:
        if self.device.type != "cuda":
            return 0
        return torch.cuda.max_memory_allocated(self.device) - self._cuda_base

    def _send_header(self, header: dict, n: int) -> None:
        raw = torch.frombuffer(bytearray(json.dumps(header).encode()), dtype=torch.uint8)
        size = torch.tensor([raw.numel()], dtype=torch.int64)
        for t, what in ((size, "header size"), (raw, "header")):
            self._wait(self.pg.send([t.to(self.device)], 1, 0), n, what)

    def _staging_buffer(self, k: int, items: list) -> torch.Tensor:
        """Staging buffer k % 2 (allocated at the first send, kept): pinned host memory when
        the group is gloo and a tensor is on CUDA, else memory on the group's device."""
        if not self._stage:
            pin = self.device.type == "cpu" and any(t.is_cuda for _, t in items)
            chunk = self.bucket_bytes // _ALIGN * _ALIGN
            self._stage = [self.meter.empty(chunk, self.device, pin) for _ in range(2)]
        return self._stage[k % 2]

    def _send_chunks(self, items: list, header: dict, fp: _Fingerprint, n: int) -> None:
        c, total = header["chunk"], header["total"]
        spans, flat = _spans(header), _FlatCache(items)
        first, pending = 0, [None, None]
        for k in range(_chunks(header)):
            if pending[k % 2] is not None:  # the buffer's previous chunk must be off the wire
                self._wait(pending[k % 2], n, f"chunk {k - 2}")
            lo, hi = k * c, min((k + 1) * c, total)
            buf = self._staging_buffer(k, items)[: hi - lo]
            while spans[first][1] < k:
                first += 1
            with _single_thread():  # a parallel copy waits for a descheduled thread
                for i in range(first, len(items)):
                    if spans[i][0] > k:
                        break
                    _pack(buf, lo, hi, header["tensors"][i], flat.get(i))
            pending[k % 2] = self.pg.send([buf], 1, 0)
            fp.update(buf)  # while the chunk is on the wire (zlib lets go of the GIL)
        for k, work in enumerate(pending):
            if work is not None:
                self._wait(work, n, f"the last chunks ({k})")

    def _wait(self, work, n: int, what: str) -> None:
        wait_work(
            work,
            self.timeout_s,
            blocking=self.device.type == "cpu",
            what=f"the {what} of relay round {n} to rank 1 ({self.names.get(1, '?')})",
            abort=getattr(self.pg, "abort", None),
        )

    def _confirm(self, n: int, version: int, fingerprint: str, failure: str | None) -> dict:
        """Every receiver's report once each set its done key (within timeout_s; at once when
        all did); raises `RelayError` unless all confirmed `fingerprint` and rank 0's
        own send (`failure`: its error) succeeded."""
        keys = {r: f"{_PREFIX}/relay-done/{r}/{n}" for r in range(1, self.world)}
        try:
            self.store.wait(list(keys.values()), timedelta(seconds=self.timeout_s))
        except RuntimeError:  # DistStoreError past the deadline: the missing are named below
            pass
        reports, failed = {}, {}
        for r, key in keys.items():
            if not self.store.check([key]):
                failed[r] = f"did not confirm within {self.timeout_s:.0f} s (dead or stuck)"
                continue
            reports[r] = json.loads(self.store.get(key).decode())
            if "why" in reports[r]:
                failed[r] = reports[r]["why"]
        for r, rep in reports.items():
            if r not in failed and not failure and rep["fp"] != fingerprint:
                failed[r] = f"received other bytes (fingerprint {rep['fp']}, sent {fingerprint})"
        if failure:
            failed[1] = failure + (f"; {failed[1]}" if 1 in failed else "")
        if failed:
            raise self._broken(failed, reports, n, version)
        return reports

    def _who(self, r: int) -> str:
        return f"rank {r} ({self.names.get(r, '?')})"

    def _broken(self, failed: dict, reports: dict, n: int, version: int) -> RelayError:
        """The error of a round that did not reach everyone. The chain broke at the first rank
        that a rank before it could not forward to, else at the first that failed; the ranks
        after it did not get the version, and a stalled rank also stalls the ones before it (a
        send completes only once the next rank takes it), so those may have lost it too."""
        who = self._who
        could_not = [r + 1 for r, rep in reports.items() if rep.get("forward_error")]
        first = min(could_not or failed)
        down = [r for r in range(first + 1, self.world) if r in failed]
        up = [r for r in range(1, first) if r in failed]
        lines = [f"{who(r)}: {why}" for r, why in sorted(failed.items())] + [
            f"{who(r)} could not forward: {rep['forward_error']}"
            for r, rep in sorted(reports.items())
            if rep.get("forward_error")
        ]
        msg = f"weight relay round {n} (version {version}): the chain broke at {who(first)}"
        if down:
            msg += f"; downstream of it {', '.join(map(who, down))} did not get version {version}"
        if up:
            msg += f"; upstream of it {', '.join(map(who, up))} lost the round too (the stall reached it)"
        msg += (
            f". Details: {'; '.join(lines)}. Check those generators' logs; raise "
            "learner.sync_timeout_s if they are only slow"
        )
        delivered = [r for r in range(1, self.world) if r not in failed]
        return RelayError(msg, delivered, failed)


class RelayReceiver(WeightReceiver):
    """Rank 1..N of a relay group: receives each chunk from rank - 1, forwards it to rank + 1
    (the last rank forwards nothing) and yields the tensors as their chunks arrive. Built like
    `WeightReceiver`; after a round, `stats` holds its report (as sent to rank 0)."""

    stats: dict = {}

    def receive(self) -> Iterator[tuple[str, torch.Tensor]]:
        """One relay round: yields every (name, tensor) in the sender's order, a bucket at a
        time. Small tensors are views into their chunk's buffer, a tensor split across chunks
        is yielded once whole (its own buffer); keep none of them past the next one to hold at
        most two chunks (plus one split tensor). Consume it to the end: the round is confirmed
        to rank 0 only then."""
        n, self.round = self.round, self.round + 1
        self.meter, self.forward_error, self.wait_s = _Meter(), None, 0.0
        base = self._cuda_mark()
        self.store.set(f"{_PREFIX}/relay-ready/{self.rank}/{n}", "1")
        try:
            header = self._recv_header(n)
            self.version = int(header["version"])
            fp = _Fingerprint()
            yield from self._chunks(header, fp, n)
        except Exception as err:  # the upstream stopped sending, or died
            why = f"receiving from rank {self.rank - 1} failed: {str(err)[:300]}"
            self._report(n, {"why": why, "forward_error": self.forward_error})
            raise WeightSyncError(
                f"weight relay round {n}: {why} (the learner, rank 0, or a generator before "
                f"this one in the chain stopped sending or died); check learner rank 0's log "
                "(RUN_DIR/logs/learner-0.log), or raise learner.sync_timeout_s if it is only slow"
            ) from err
        self.stats = {
            "fp": fp.hexdigest(),
            "peak": self.meter.peak,
            "cuda_peak": 0 if base is None else torch.cuda.max_memory_allocated(self.device) - base,
            "wait_s": self.wait_s,
            "forward_error": self.forward_error,
        }
        self._report(n, self.stats)

    def _report(self, n: int, what: dict) -> None:
        """Set this rank's done key: its report, or {"why": ...} when its round failed."""
        try:
            self.store.set(f"{_PREFIX}/relay-done/{self.rank}/{n}", json.dumps(what))
        except Exception:  # rank 0's store is gone: it reports the silence itself
            if "why" not in what:
                raise

    def _cuda_mark(self) -> int | None:
        if self.device.type != "cuda":
            return None
        torch.cuda.reset_peak_memory_stats(self.device)
        return torch.cuda.memory_allocated(self.device)

    def _recv_header(self, n: int) -> dict:
        size = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._recv(size, n, "header size")
        raw = torch.empty(int(size.item()), dtype=torch.uint8, device=self.device)
        self._recv(raw, n, "header")
        return json.loads(bytes(raw.cpu().numpy()).decode())

    def _recv(self, buf: torch.Tensor, n: int, what: str) -> None:
        """Receive `buf` from rank - 1 and forward it (small messages: the header)."""
        self._wait_recv(self.pg.recv([buf], self.rank - 1, 0), n, what)
        self._wait_forward(self._forward(buf), what)

    def _wait_recv(self, work, n: int, what: str) -> None:
        t0 = time.perf_counter()
        wait_work(
            work,
            self.timeout_s,
            blocking=self.device.type == "cpu",
            what=f"the {what} of relay round {n} from rank {self.rank - 1}",
            abort=getattr(self.pg, "abort", None),
        )
        self.wait_s += time.perf_counter() - t0

    def _forward(self, buf: torch.Tensor):
        """Start sending `buf` to rank + 1 (None: the last rank, or its forward failed)."""
        if self.rank == self.world - 1 or self.forward_error is not None:
            return None
        return self.pg.send([buf], self.rank + 1, 0)

    def _wait_forward(self, work, what: str) -> None:
        """A failed forward stops forwarding (rank + 1 and those after it miss the round, and
        rank 0 names them) but not this receiver's own round when rank + 1 died (gloo sees the
        closed connection at once). A stalled rank + 1 stalls this rank too: a send completes
        only once rank + 1 takes it, and a gloo timeout closes the group's other pairs. No
        abort: on NCCL it would end this rank's receive too."""
        if work is None:
            return
        try:
            wait_work(work, self.timeout_s, blocking=self.device.type == "cpu", what=what)
        except RuntimeError as err:
            self.forward_error = f"to rank {self.rank + 1}, at the {what}: {str(err)[:200]}"

    def _post(self, header: dict, k: int):
        """Post the receive of chunk k into a new buffer: (buffer, work), or None past the end."""
        c, total = header["chunk"], header["total"]
        if k >= _chunks(header):
            return None
        buf = self.meter.empty(min(c, total - k * c), self.device)
        return buf, self.pg.recv([buf], self.rank - 1, 0)

    def _chunks(self, header: dict, fp: _Fingerprint, n: int):
        c, tensors, spans = header["chunk"], header["tensors"], _spans(header)
        ending: list[list[int]] = [[] for _ in range(_chunks(header))]
        starts_split = {}
        for i, (a, b) in enumerate(spans):
            ending[b].append(i)
            if a != b:
                starts_split[a] = i
        split, nxt = None, self._post(header, 0)
        for k in range(len(ending)):
            (buf, work), nxt = nxt, None
            self._wait_recv(work, n, f"chunk {k}")
            fwd = self._forward(buf)
            fp.update(buf)
            if split is not None:  # a tensor bigger than a chunk, reassembled whole
                with _single_thread():
                    _unpack(split[1], buf, k * c, tensors[split[0]][3])
            if not ending[k]:
                nxt = self._post(header, k + 1)
            for j, i in enumerate(ending[k]):
                if j == 1:  # the caller let go of the previous chunk's last tensor by now
                    nxt = self._post(header, k + 1)
                name, dtype, shape, off = tensors[i]
                if split is not None and split[0] == i:
                    flat, split = split[1], None
                else:
                    flat = buf[off - k * c : off - k * c + _nbytes(tensors[i])]
                yield name, flat.view(getattr(torch, dtype)).view(shape)
            if k in starts_split:  # allocated once the one before it was handed over
                i = starts_split[k]
                split = (i, self.meter.empty(_nbytes(tensors[i]), self.device))
                with _single_thread():
                    _unpack(split[1], buf, k * c, tensors[i][3])
            if nxt is None:
                nxt = self._post(header, k + 1)
            self._wait_forward(fwd, f"chunk {k}")

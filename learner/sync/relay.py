"""Weights to N receivers at the cost of about one transfer: a pipelined chain relay (issue 33).

One stateless group over rank 0 (the learner) and every receiver (ranks 1..N), built as the
per-generator channel of learner/sync/transport.py is (`RelaySender`, `RelayReceiver` inherit its
bring-up: store, hello/world/backend keys, gloo or NCCL). The model travels as one byte stream in
the serving dtype, cut into chunks of `bucket_bytes`: rank 0 sends chunk k to the first receiver
of the round's chain (point to point), each receiver receives it from the one before it and
forwards it to the next (async) while its caller loads it. So a sync to N receivers takes about
(B + N - 1) chunk times for B chunks, where one channel per receiver sent in turn takes N x B.

Layout, memory bounds, the same-bytes fingerprint (rank 0 names every receiver that got other
bytes): learner/sync/relay_wire.py.

Round n: every receiver sets `relay-ready/{rank}/{n}`; rank 0 waits for all (names the missing;
with `drop_missing` it goes on with those ready at the deadline; `wait_ready` is that wait alone)
and publishes the round's chain `relay-chain/{n}` (each receiver's neighbours in it; one left out
is told so), sends an int64 header length and the JSON header down the chain, then the chunks;
every receiver ends with `relay-done/{rank}/{n}` (JSON: fingerprint, peak bytes, a forward error;
or {"why": ...} when its round failed). Every wait is bounded by `timeout_s` on both backends
(learner/sync/collective_wait.py `wait_work`): once all receivers are ready, rank 0 gives up
within 2 x timeout_s (its send, then the receivers' keys). A receiver whose next rank died (gloo
sees the closed connection at once) stops forwarding but keeps receiving and loading, and reports
it. A send completes only once the next rank takes it, so a member alive but stuck stalls the ones
before it too, and on gloo a timed-out wait closes the group's other connections: they lose the
round as well. Rank 0's `RelayError` names the member where the chain broke (the first that a rank
before it could not forward to, else the first that failed), the ranks downstream that did not get
the version and the ones upstream the stall reached (`.delivered`: the ranks that confirmed it).

Bench: `microcoder bench weight-sync --receivers 1,2,4`. In a run (`learner.weight_transport =
"relay"`) rank 0's `RelayHub` (actors/weights/relay_hub.py) keeps the epoch's `RelaySender`, each
generator's workers a `RelayReceiver` (worker_ext.py `mc_open_relay`; actors/weights/relay_member.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta

import torch

from microcoder.learner.sync.collective_wait import wait_work
from microcoder.learner.sync.relay_wire import (
    Fingerprint,
    FlatCache,
    Meter,
    RelayError,
    RelayStats,
    chain_error,
    chunk_count,
    chunk_spans,
    entry_nbytes,
    pack_chunk,
    relay_layout,
    unpack_split,
)
from microcoder.learner.sync.transport import (
    ALIGN,
    KEY_PREFIX,
    WeightReceiver,
    WeightSender,
    WeightSyncError,
    single_thread,
    wait_keys,
    wait_peer,
)

__all__ = ["RelayError", "RelayReceiver", "RelaySender", "RelayStats", "relay_layout"]


class RelaySender(WeightSender):
    """Rank 0 of a relay group: sends each round down the chain 0 -> 1 -> ... -> N. Built like
    `WeightSender` (same arguments; its group is the chain's); `dtype` is the serving dtype
    floating tensors are cast to on the wire (None: as they are)."""

    def __init__(self, *args, dtype: torch.dtype | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dtype = dtype
        self.meter = Meter()
        self._stage: list[torch.Tensor] = []

    def send(
        self,
        named_tensors: Iterable[tuple[str, torch.Tensor]],
        version: int,
        *,
        drop_missing: bool = False,
        join_s: float | None = None,
    ) -> RelayStats:
        """Send all tensors as weights of `version` to every receiver; returns the stats once
        every receiver confirmed the same bytes, else raises `RelayError` naming who did not.
        `drop_missing`: a receiver not ready within `join_s` (default timeout_s) is left out of
        this round (the chain closes over it, `RelayStats.skipped`) instead of failing it."""
        start = time.perf_counter()
        n = self.round
        self.round = self.round + 1
        items = [(name, t.detach()) for name, t in named_tensors]
        header = relay_layout(items, version, self.bucket_bytes, self.dtype)
        self.chain = self._members(n, drop_missing, self.timeout_s if join_s is None else join_s)
        self._cuda_mark()
        fp = Fingerprint()
        failure = None
        try:
            self._send_header(header, n)
            self._send_chunks(items, header, fp, n)
        except RuntimeError as err:  # rank 1 dead or stalled (a stall downstream reaches it)
            failure = f"the send to it failed: {str(err)[:300]}"
        reports = self._confirm(n, version, fp.hexdigest(), failure)
        return RelayStats(
            version=version,
            tensors=len(items),
            chunks=chunk_count(header),
            bytes=header["total"],
            bucket_bytes=header["chunk"],
            seconds=time.perf_counter() - start,
            fingerprint=fp.hexdigest(),
            sender_peak_extra_bytes=max(self.meter.peak, self._cuda_peak()),
            receiver_peak_extra_bytes=max(
                max(r["peak"], r.get("cuda_peak", 0)) for r in reports.values()
            ),
            receivers=reports,
            skipped=[r for r in range(1, self.world) if r not in self.chain],
        )

    def wait_ready(self, join_s: float, n: int | None = None) -> list[int]:
        """Wait up to `join_s` (0: not at all) for round `n`'s ready keys (default: the next
        round's); returns the ranks not ready. Sends nothing: rank 0's hub waits with it without
        `WorkLock`, then sends under it with `drop_missing=True, join_s=0`."""
        n = self.round if n is None else n
        keys = [f"{KEY_PREFIX}/relay-ready/{r}/{n}" for r in range(1, self.world)]
        if join_s > 0:
            try:
                self.store.wait(keys, timedelta(seconds=join_s))
            except RuntimeError:  # DistStoreError past the deadline: the missing are returned
                pass
        all_ready = self.store.check(keys)  # one call when all are (the usual case)
        return [] if all_ready else [r for r, k in enumerate(keys, 1) if not self.store.check([k])]

    def _members(self, n: int, drop_missing: bool, join_s: float) -> list[int]:
        """The round's chain: every receiver, or with `drop_missing` those ready within `join_s`
        (0: now); published as `relay-chain/{n}` (each receiver finds its neighbours there)."""
        keys = {r: f"{KEY_PREFIX}/relay-ready/{r}/{n}" for r in range(1, self.world)}
        what = f"start receiving relay round {n}"
        if not drop_missing:
            wait_keys(self.store, keys, self.names, what, join_s)
        else:
            self.wait_ready(join_s, n)
        if drop_missing and not any(self.store.check([k]) for k in keys.values()):
            wait_keys(self.store, keys, self.names, what, 0.01)  # names them all
        chain = [r for r, k in keys.items() if self.store.check([k])]
        self.store.set(f"{KEY_PREFIX}/relay-chain/{n}", json.dumps(chain))
        return chain

    def _cuda_mark(self) -> None:
        if self.device.type == "cuda":
            self._cuda_base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)

    def _cuda_peak(self) -> int:
        cuda = self.device.type == "cuda"
        return torch.cuda.max_memory_allocated(self.device) - self._cuda_base if cuda else 0

    def _send_header(self, header: dict, n: int) -> None:
        raw = torch.frombuffer(bytearray(json.dumps(header).encode()), dtype=torch.uint8)
        size = torch.tensor([raw.numel()], dtype=torch.int64)
        for t, what in ((size, "header size"), (raw, "header")):
            self._wait(self.pg.send([t.to(self.device)], self.chain[0], 0), n, what)

    def _staging_buffer(self, k: int, items: list) -> torch.Tensor:
        """Staging buffer k % 2 (allocated at the first send, kept): pinned host memory when
        the group is gloo and a tensor is on CUDA, else memory on the group's device."""
        if not self._stage:
            pin = self.device.type == "cpu" and any(t.is_cuda for _, t in items)
            chunk = self.bucket_bytes // ALIGN * ALIGN
            self._stage = [self.meter.empty(chunk, self.device, pin) for _ in range(2)]
        return self._stage[k % 2]

    def _send_chunks(self, items: list, header: dict, fp: Fingerprint, n: int) -> None:
        c = header["chunk"]
        total = header["total"]
        spans = chunk_spans(header)
        flat = FlatCache(items)
        first = 0
        pending = [None, None]
        for k in range(chunk_count(header)):
            if pending[k % 2] is not None:  # the buffer's previous chunk must be off the wire
                self._wait(pending[k % 2], n, f"chunk {k - 2}")
            lo = k * c
            hi = min((k + 1) * c, total)
            buf = self._staging_buffer(k, items)[: hi - lo]
            while spans[first][1] < k:
                first += 1
            with single_thread():  # a parallel copy waits for a descheduled thread
                for i in range(first, len(items)):
                    if spans[i][0] > k:
                        break
                    pack_chunk(buf, lo, hi, header["tensors"][i], flat.get(i))
            pending[k % 2] = self.pg.send([buf], self.chain[0], 0)
            fp.update(buf)  # while the chunk is on the wire (zlib lets go of the GIL)
        for k, work in enumerate(pending):
            if work is not None:
                self._wait(work, n, f"the last chunks ({k})")

    def _wait(self, work, n: int, what: str) -> None:
        wait_peer(work, self, f"the {what} of relay round {n} to {self._who(self.chain[0])}")

    def _confirm(self, n: int, version: int, fingerprint: str, failure: str | None) -> dict:
        """Every receiver's report once each set its done key (within timeout_s; at once when
        all did); raises `RelayError` unless all confirmed `fingerprint` and rank 0's
        own send (`failure`: its error) succeeded."""
        keys = {r: f"{KEY_PREFIX}/relay-done/{r}/{n}" for r in self.chain}
        try:
            self.store.wait(list(keys.values()), timedelta(seconds=self.timeout_s))
        except RuntimeError:  # DistStoreError past the deadline: the missing are named below
            pass
        reports = {}
        failed = {}
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
            first = self.chain[0]
            failed[first] = failure + (f"; {failed[first]}" if first in failed else "")
        if failed:
            raise chain_error(self._who, self.chain, failed, reports, n, version)
        return reports

    def _who(self, r: int) -> str:
        return f"rank {r} ({self.names.get(r, '?')})"


class RelayReceiver(WeightReceiver):
    """Rank 1..N of a relay group: receives each chunk from the rank before it in the round's
    chain (`up`), forwards it to the one after (`down`; the last forwards nothing) and yields
    the tensors as their chunks arrive. Built like `WeightReceiver`; after a round, `stats`
    holds its report (as sent to rank 0)."""

    stats: dict = {}

    def receive(self) -> Iterator[tuple[str, torch.Tensor]]:
        """One relay round: yields every (name, tensor) in the sender's order, a bucket at a
        time. Small tensors are views into their chunk's buffer, a tensor split across chunks
        is yielded once whole (its own buffer); keep none of them past the next one to hold at
        most two chunks (plus one split tensor). Consume it to the end: the round is confirmed
        to rank 0 only then."""
        n = self.round
        self.round = self.round + 1
        self.meter = Meter()
        self.forward_error = None
        self.wait_s = 0.0
        base = self._cuda_mark()
        self.store.set(f"{KEY_PREFIX}/relay-ready/{self.rank}/{n}", "1")
        self._take_place(n)
        try:
            header = self._recv_header(n)
            self.version = int(header["version"])
            fp = Fingerprint()
            yield from self._chunks(header, fp, n)
        except Exception as err:  # the upstream stopped sending, or died
            why = f"receiving from rank {self.up} failed: {str(err)[:300]}"
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
            self.store.set(f"{KEY_PREFIX}/relay-done/{self.rank}/{n}", json.dumps(what))
        except Exception:  # rank 0's store is gone: it reports the silence itself
            if "why" not in what:
                raise

    def _take_place(self, n: int) -> None:
        """This rank's neighbours in round n's chain (`up` sends to it, `down` is sent to;
        None: the last), from rank 0's `relay-chain/{n}`; raises when it was left out."""
        key = f"{KEY_PREFIX}/relay-chain/{n}"
        try:  # rank 0 itself may wait timeout_s for the other receivers first
            self.store.wait([key], timedelta(seconds=2 * self.timeout_s))
        except RuntimeError as err:
            raise WeightSyncError(
                f"weight relay round {n}: the learner (rank 0) did not start the round within "
                f"{2 * self.timeout_s:.0f} s; check learner rank 0's log, or raise "
                "learner.sync_timeout_s"
            ) from err
        chain = [0, *json.loads(self.store.get(key).decode())]
        if self.rank not in chain:
            raise WeightSyncError(
                f"weight relay round {n}: this receiver was left out of the round (it was not "
                "ready in time when the round started); it gets the version another way"
            )
        i = chain.index(self.rank)
        self.up = chain[i - 1]
        self.down = chain[i + 1] if i + 1 < len(chain) else None

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
        self._wait_recv(self.pg.recv([buf], self.up, 0), n, what)
        self._wait_forward(self._forward(buf), what)

    def _wait_recv(self, work, n: int, what: str) -> None:
        t0 = time.perf_counter()
        wait_peer(work, self, f"the {what} of relay round {n} from rank {self.up}")
        self.wait_s += time.perf_counter() - t0

    def _forward(self, buf: torch.Tensor):
        """Start sending `buf` to rank + 1 (None: the last rank, or its forward failed)."""
        if self.down is None or self.forward_error is not None:
            return None
        return self.pg.send([buf], self.down, 0)

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
            self.forward_error = f"to rank {self.down}, at the {what}: {str(err)[:200]}"

    def _post(self, header: dict, k: int):
        """Post the receive of chunk k into a new buffer: (buffer, work), or None past the end."""
        c = header["chunk"]
        total = header["total"]
        if k >= chunk_count(header):
            return None
        buf = self.meter.empty(min(c, total - k * c), self.device)
        return buf, self.pg.recv([buf], self.up, 0)

    def _chunks(self, header: dict, fp: Fingerprint, n: int):
        c = header["chunk"]
        tensors = header["tensors"]
        spans = chunk_spans(header)
        ending: list[list[int]] = [[] for _ in range(chunk_count(header))]
        starts_split = {}
        for i, (a, b) in enumerate(spans):
            ending[b].append(i)
            if a != b:
                starts_split[a] = i
        split = None
        nxt = self._post(header, 0)
        for k in range(len(ending)):
            (buf, work) = nxt
            nxt = None
            self._wait_recv(work, n, f"chunk {k}")
            fwd = self._forward(buf)
            fp.update(buf)
            if split is not None:  # a tensor bigger than a chunk, reassembled whole
                with single_thread():
                    unpack_split(split[1], buf, k * c, tensors[split[0]][3])
            if not ending[k]:
                nxt = self._post(header, k + 1)
            for j, i in enumerate(ending[k]):
                if j == 1:  # the caller let go of the previous chunk's last tensor by now
                    nxt = self._post(header, k + 1)
                name, dtype, shape, off = tensors[i]
                if split is not None and split[0] == i:
                    flat = split[1]
                    split = None
                else:
                    flat = buf[off - k * c : off - k * c + entry_nbytes(tensors[i])]
                yield name, flat.view(getattr(torch, dtype)).view(shape)
            if k in starts_split:  # allocated once the one before it was handed over
                i = starts_split[k]
                split = (i, self.meter.empty(entry_nbytes(tensors[i]), self.device))
                with single_thread():
                    unpack_split(split[1], buf, k * c, tensors[i][3])
            if nxt is None:
                nxt = self._post(header, k + 1)
            self._wait_forward(fwd, f"chunk {k}")

"""Weight broadcast from learner rank 0 to generator workers over a dedicated stateless group.

The group is independent of the learner's default process group: a `TCPStore` hosted by the
sender (rank 0) and a gloo (CPU) or NCCL (CUDA) process group built directly on it, which each
generator worker joins as ranks 1..N. NCCL refuses two ranks on one GPU, so when a receiver
shares the sender's GPU (one-GPU machines) the sender picks gloo over CPU copies for the group
(`channel_backend`). Only torch (and the standard-library-only microcoder/protocol.py) is
imported here, so a vLLM worker extension can call `WeightReceiver` inside the `VLLM::Worker`
process.

Protocol of one sync round n (keys in the store, data over the process group):
  0. (optional) the sender sets `sender-ready/{ticket}` (`signal_ready`) for the generator that
     asked for the round: it pauses its engine only then (actors/weights/pull.py);
  1. every receiver sets `ready/{rank}/{n}` when it starts receiving; the sender waits for all
     (a receiver missing at the deadline is named in the error);
  2. broadcast int64 [header length], then the header (`WeightSyncHeader`, microcoder/protocol.py:
     JSON as uint8: version, buckets, and for each tensor name/dtype/shape/bucket/offset), then
     each bucket as one uint8 buffer;
  3. every receiver sets `done/{rank}/{n}` after its last bucket; the sender waits for all.
Every wait is bounded by `timeout_s` on both backends (learner/sync/collective_wait.py: NCCL's own
`work.wait()` has no deadline, so its works are polled, and the communicator aborted past it).
Buckets pack tensors up to `bucket_bytes` (a bigger tensor travels alone, without a copy); the
sender packs bucket i+1 while bucket i is on the wire, and a receiver posts bucket i+1 once the
caller took the first tensor of bucket i (by then it let go of bucket i-1's), so bucket i+1
crosses the wire while the rest of bucket i is loaded, and a caller that loads each tensor as
it comes holds at most two bucket buffers at once (actors/engines/worker_ext.py `mc_receive_and_load`).
No pickle: the header is JSON and tensors are raw bytes.

Bring-up is collective: `WeightSender(...)` returns once all N receivers have constructed their
`WeightReceiver` (either may start first, within the timeout). Each receiver declares the world
size it joins (`world/{rank}`); a sender built with `num_receivers=None` takes N from rank 1's
declaration (a tensor-parallel engine knows how many workers it has, the learner does not), and
a sender whose peers disagree on the size fails naming them instead of hanging. After an error
the group is broken; close both sides and build a new one.

The run uses one group per generator (a *channel*): rank 0 holds a `WeightSender` per
generator (actors/weights/publisher.py `WeightPublisher`); each vLLM worker of the generator builds
its `WeightReceiver` (actors/engines/worker_ext.py). The whole path: docs/architecture.md §7.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from microcoder.learner.sync.collective_wait import wait_work
from microcoder.learner.sync.peer_link import Links, connect
from microcoder.protocol import TensorEntry, WeightSyncHeader

# Public surface shared with learner/sync/relay.py, relay_wire.py, actors/weights/ and
# bench/weight_sync.py: the store keys' prefix, the alignment of tensors inside a buffer, the
# key wait, single-thread packing, the bounded wait on one collective and rank 0's broadcast.
KEY_PREFIX = "microcoder-weights"
"""Every key a channel or relay round sets in its TCPStore starts with this."""
ALIGN = 64
"""Bytes: tensor offsets inside a bucket (and a relay chunk) are multiples of this."""


def ready_key(ticket: str) -> str:
    """The store key a sender sets when it is ready to send the round asked for as `ticket`."""
    return f"{KEY_PREFIX}/sender-ready/{ticket}"


class WeightSyncError(RuntimeError):
    """A peer of the weight-sync group did not answer in time or the transfer failed."""


@dataclass(frozen=True)
class SyncStats:
    """What one `send` moved."""

    version: int
    tensors: int
    buckets: int
    bytes: int
    seconds: float


def _make_group(store: dist.Store, rank: int, world: int, timeout: timedelta, device, peers: str):
    """The channel's group; a peer that died while it was built is named (`peers`)."""
    prefixed = dist.PrefixStore(f"{KEY_PREFIX}/pg", store)
    try:
        if device.type == "cuda":
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = timeout
            return dist.ProcessGroupNCCL(prefixed, rank, world, opts)
        return dist.ProcessGroupGloo(prefixed, rank, world, timeout)
    except RuntimeError as err:
        raise WeightSyncError(
            f"weight sync: building the group with {peers} failed ({str(err).strip()[:200]}); "
            "a peer died after it joined: see its log"
        ) from err


def _gpu_id(device: torch.device) -> str:
    """The physical GPU of `device` (its UUID), or "" for a CPU device."""
    if device.type != "cuda":
        return ""
    return str(torch.cuda.get_device_properties(device).uuid)


def channel_backend(sender_gpu: str, receiver_gpus: list[str]) -> str:
    """ "nccl" when the sender and every receiver are on distinct GPUs (ids from `_gpu_id`, ""
    for a CPU), else "gloo": NCCL needs a GPU per rank and refuses two ranks on one GPU."""
    gpus = [sender_gpu, *receiver_gpus]
    return "nccl" if all(gpus) and len(set(gpus)) == len(gpus) else "gloo"


def wait_keys(
    store: dist.Store,
    keys: dict[int, str],
    names: dict[int, str],
    what: str,
    timeout: float,
    dead: Callable[[list[int]], list[int]] | None = None,
) -> None:
    """Wait until every key exists; else raise naming the ranks whose key is missing. `dead`
    (the sender's `Links.dead`): a rank whose process is gone ends the wait at once, named.
    Polled with `check` (a `wait` that times out logs a warning each time)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    missing = dict(keys)
    while True:
        missing = {r: k for r, k in missing.items() if not store.check([k])}
        if not missing:
            return
        gone = dead(sorted(missing)) if dead is not None else []
        # A rank sets its key before it exits: one whose key landed between the check above and
        # its link closing (it confirmed, then exited, as a last round's receiver does) is done.
        gone = [r for r in gone if not store.check([missing[r]])]
        if gone:
            who = ", ".join(f"rank {r} ({names.get(r, '?')})" for r in gone)
            raise WeightSyncError(
                f"weight sync: {who} died before it could {what}: its connection to learner "
                "rank 0 closed (its process exited); see that generator's log. Its channel is "
                "dropped; a restarted generator opens a new one"
            )
        if time.monotonic() >= deadline:
            break
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.1)
    who = ", ".join(f"rank {r} ({names.get(r, 'never joined')})" for r in sorted(missing))
    raise WeightSyncError(
        f"weight sync: {who} did not {what} within {timeout:.0f} s; check that the generator "
        "process is alive and calling WeightReceiver.receive(), or raise learner.sync_timeout_s"
    )


@contextmanager
def single_thread():
    """Run memory-bound packing on one intra-op thread: on a busy CPU a parallel copy waits for
    its descheduled second thread (measured up to 50× slower than one thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def wait_peer(work, peer, what: str) -> None:
    """One collective of `peer` (a sender or receiver of either transport: anything with
    `device`, `pg` and `timeout_s`), within its timeout_s on gloo and NCCL
    alike: NCCL's own wait has no deadline (learner/sync/collective_wait.py `wait_work`)."""
    blocking = peer.device.type == "cpu"
    abort = getattr(peer.pg, "abort", None)
    wait_work(work, peer.timeout_s, blocking=blocking, what=what, abort=abort)


def broadcast_root(pg, tensor: torch.Tensor):
    """Start a broadcast of `tensor` from rank 0 of `pg`; returns its work (wait with `wait_peer`)."""
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    return pg.broadcast([tensor], opts)


class WeightSender:
    """Rank 0 of the weight-sync group: hosts the store and broadcasts state dicts."""

    def __init__(
        self,
        host: str,
        port: int,
        num_receivers: int | None,
        *,
        timeout_s: float = 120.0,
        join_timeout_s: float | None = None,
        bucket_bytes: int = 256 << 20,
        device: str | torch.device = "cpu",
    ) -> None:
        """Host the store at host:port and wait (join_timeout_s, default timeout_s) for all
        `num_receivers` to join (None: as many as rank 1 declares); later rounds wait at most
        timeout_s for each peer."""
        self.world = None if num_receivers is None else num_receivers + 1
        self.timeout_s = timeout_s
        self.bucket_bytes = int(bucket_bytes)
        self.device = torch.device(device)
        self.round = 0
        self._staging: list[torch.Tensor | None] = [None, None]
        self._flip = 0
        join = join_timeout_s or timeout_s
        store_td = timedelta(seconds=max(timeout_s, join))
        self.store = dist.TCPStore(
            host, port, self.world, is_master=True, timeout=store_td, wait_for_workers=False
        )
        deadline = time.monotonic() + join
        self.links = Links(host)  # is each receiver's process alive (learner/sync/peer_link.py)
        self.store.set(f"{KEY_PREFIX}/link", str(self.links.port))
        if self.world is None:
            first = {1: f"{KEY_PREFIX}/hello/1"}
            wait_keys(self.store, first, {}, "join the weight-sync group", join)
            self.world = int(self.store.get(f"{KEY_PREFIX}/world/1"))
        keys = {r: f"{KEY_PREFIX}/hello/{r}" for r in range(1, self.world)}
        left = max(1.0, deadline - time.monotonic())
        wait_keys(self.store, keys, {}, "join the weight-sync group", left)
        self.names = {r: self.store.get(k).decode() for r, k in keys.items()}
        self.links.accept(self.names, max(1.0, deadline - time.monotonic()))
        self._check_world()
        self.device = self._choose_device()
        who = ", ".join(f"rank {r} ({n})" for r, n in self.names.items())
        self.pg = _make_group(
            self.store, 0, self.world, timedelta(seconds=timeout_s), self.device, who
        )

    def _choose_device(self) -> torch.device:
        """NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): when a receiver shares
        the sender's GPU (a one-GPU machine), the whole group runs on gloo over CPU copies.
        The choice is published for the receivers (`backend`), which build the same group."""
        theirs = [self.store.get(f"{KEY_PREFIX}/gpu/{r}").decode() for r in self.names]
        backend = channel_backend(_gpu_id(self.device), theirs)
        self.store.set(f"{KEY_PREFIX}/backend", backend)
        return self.device if backend == "nccl" else torch.device("cpu")

    def _check_world(self) -> None:
        """Every receiver must have joined a group of this sender's size (else NCCL/gloo hang)."""
        declared = {r: int(self.store.get(f"{KEY_PREFIX}/world/{r}")) for r in self.names}
        wrong = {r: w for r, w in declared.items() if w != self.world}
        if wrong:
            who = ", ".join(
                f"rank {r} ({self.names[r]}) joined a group of {w}" for r, w in wrong.items()
            )
            raise WeightSyncError(
                f"weight sync: the sender's group has {self.world} ranks but {who}; the "
                "generator's channel spec and its engine's worker count disagree"
            )

    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> SyncStats:
        """Broadcast all tensors (in bucket order) as weights of `version`; returns the stats."""
        start = time.perf_counter()
        n = self.round
        self.round += 1
        items = [(name, t.detach()) for name, t in named_tensors]
        header, buckets = bucket_layout(items, version, self.bucket_bytes)
        ranks = range(1, self.world)
        self.wait_receivers(self.timeout_s, n)
        try:
            raw = torch.frombuffer(bytearray(header.to_json()), dtype=torch.uint8)
            size = torch.tensor([raw.numel()], dtype=torch.int64).to(self.device)
            self._wait(broadcast_root(self.pg, size), n, "header size")
            self._wait(broadcast_root(self.pg, raw.to(self.device)), n, "header")
            pending = None
            for k, bucket in enumerate(buckets):
                with single_thread():
                    buf = self._pack(items, bucket)
                work = broadcast_root(self.pg, buf)
                if pending is not None:
                    self._wait(pending, n, f"bucket {k - 1}")
                pending = work
            if pending is not None:
                self._wait(pending, n, f"bucket {len(buckets) - 1}")
        except RuntimeError as err:  # a receiver that stopped receiving, or died, mid-transfer
            who = ", ".join(f"rank {r} ({name})" for r, name in sorted(self.names.items()))
            raise WeightSyncError(
                f"weight sync round {n} (version {version}): the broadcast to {who} did not "
                f"complete within {self.timeout_s:.0f} s (a receiver that stopped receiving or "
                "died mid-transfer); check that generator's log, or raise learner.sync_timeout_s "
                f"if its link is this slow: {err}"
            ) from err
        wait_keys(
            self.store,
            {r: f"{KEY_PREFIX}/done/{r}/{n}" for r in ranks},
            self.names,
            f"confirm round {n}",
            self.timeout_s,
            self.links.dead,
        )
        total = sum(header.buckets)
        return SyncStats(version, len(items), len(buckets), total, time.perf_counter() - start)

    def _ready_keys(self, n: int | None) -> dict[int, str]:
        n = self.round if n is None else n
        return {r: f"{KEY_PREFIX}/ready/{r}/{n}" for r in range(1, self.world)}

    def receivers_ready(self, timeout_s: float) -> bool:
        """Whether every receiver started receiving the next round within `timeout_s`."""
        try:
            self.wait_receivers(timeout_s)
            return True
        except WeightSyncError:  # late, or dead: `wait_receivers` says which
            return False

    def wait_receivers(self, timeout_s: float, n: int | None = None) -> None:
        """Wait up to `timeout_s` for every receiver to start receiving round `n` (None: the
        next); else raise naming the ones missing."""
        n = self.round if n is None else n
        keys = self._ready_keys(n)
        what = f"start receiving round {n}"
        wait_keys(self.store, keys, self.names, what, timeout_s, self.links.dead)

    def _wait(self, work, n: int, what: str) -> None:
        who = ", ".join(f"rank {r} ({name})" for r, name in sorted(self.names.items()))
        wait_peer(work, self, f"the {what} of round {n} to {who}")

    def signal_ready(self, ticket: str) -> None:
        """Tell the generator that asked for send `ticket` that this sender is about to send:
        it pauses its engine only now (actors/weights/pull.py)."""
        self.store.set(ready_key(ticket), "1")

    def _pack(self, items: list[tuple[str, torch.Tensor]], bucket: dict) -> torch.Tensor:
        members = bucket["members"]
        if len(members) == 1:  # a lone tensor travels as itself
            t = items[members[0]][1].contiguous()
            return t.reshape(-1).view(torch.uint8).to(self.device)
        # One cat into the bucket (alignment gaps as zero pieces): a single kernel launch, where a
        # copy per tensor costs a parallel-region start each (slow on busy CPUs).
        pieces = []
        end = 0
        for i, offset in zip(members, bucket["offsets"], strict=True):
            if offset > end:
                pieces.append(torch.zeros(offset - end, dtype=torch.uint8))
            flat = items[i][1].contiguous().reshape(-1).view(torch.uint8)
            pieces.append(flat)
            end = offset + flat.numel()
        return torch.cat([p.to(self.device) for p in pieces], out=self._buffer(bucket["nbytes"]))

    def _buffer(self, nbytes: int) -> torch.Tensor:
        """One of two reused staging buffers (bucket i+1 is packed while bucket i is on the wire)."""
        self._flip = 1 - self._flip
        buf = self._staging[self._flip]
        if buf is None or buf.numel() < nbytes:
            buf = torch.empty(
                max(nbytes, min(self.bucket_bytes, 1 << 30)), dtype=torch.uint8, device=self.device
            )
            self._staging[self._flip] = buf
        return buf[:nbytes]

    def close(self) -> None:
        """Leave the group (receivers see their next receive fail)."""
        self.pg = None
        self.store = None
        self.links.close()


def bucket_layout(
    items: list[tuple[str, torch.Tensor]], version: int, bucket_bytes: int
) -> tuple[WeightSyncHeader, list[dict]]:
    """Header and bucket plan: consecutive tensors up to bucket_bytes per bucket.

    Offsets inside a bucket are aligned to ALIGN bytes so every tensor can be viewed in place.
    """
    tensors = []
    buckets = []
    cur: dict = {"nbytes": 0, "members": [], "offsets": []}
    for i, (name, t) in enumerate(items):
        nbytes = t.numel() * t.element_size()
        offset = -(-cur["nbytes"] // ALIGN) * ALIGN
        if cur["members"] and offset + nbytes > bucket_bytes:
            buckets.append(cur)
            cur = {"nbytes": 0, "members": [], "offsets": []}
            offset = 0
        dtype = str(t.dtype).removeprefix("torch.")
        tensors.append(TensorEntry(name, dtype, list(t.shape), len(buckets), offset))
        cur["members"].append(i)
        cur["offsets"].append(offset)
        cur["nbytes"] = offset + nbytes
    if cur["members"]:
        buckets.append(cur)
    return WeightSyncHeader(version, [b["nbytes"] for b in buckets], tensors), buckets


class WeightReceiver:
    """Rank 1..N of the weight-sync group (a generator worker); yields (name, tensor) pairs."""

    def __init__(
        self,
        host: str,
        port: int,
        rank: int,
        world_size: int,
        *,
        timeout_s: float = 120.0,
        name: str = "",
        device: str | torch.device = "cpu",
    ) -> None:
        if not 1 <= rank < world_size:
            raise ValueError(
                f"receiver rank must be in 1..{world_size - 1} (rank 0 is the sender), got {rank}"
            )
        self.rank = rank
        self.world = world_size
        self.timeout_s = timeout_s
        self.device = torch.device(device)
        self.round = 0
        self.version: int | None = None
        """Version of the weights of the last round received (None before the first)."""
        td = timedelta(seconds=timeout_s)
        self.store = dist.TCPStore(host, port, world_size, is_master=False, timeout=td)
        label = name or f"receiver pid {os.getpid()} on {socket.gethostname()}"
        self.store.set(f"{KEY_PREFIX}/world/{rank}", str(world_size))  # before hello: read at join
        self.store.set(f"{KEY_PREFIX}/gpu/{rank}", _gpu_id(self.device))
        link = int(self.store.get(f"{KEY_PREFIX}/link"))  # the sender sets it before any hello
        self._link = connect(host, link, rank, timeout_s)  # open while this process lives
        self.store.set(f"{KEY_PREFIX}/hello/{rank}", label)
        try:  # the sender publishes its choice once every receiver has said hello
            self.store.wait([f"{KEY_PREFIX}/backend"], td)
        except RuntimeError as err:
            raise WeightSyncError(
                f"weight sync: the learner (rank 0) did not complete the group of {world_size} "
                f"within {timeout_s:.0f} s (another receiver missing, or the sender died): {err}"
            ) from err
        if self.store.get(f"{KEY_PREFIX}/backend").decode() == "gloo":
            self.device = torch.device("cpu")
        self.pg = _make_group(self.store, rank, world_size, td, self.device, "the learner (rank 0)")

    def receive(self) -> Iterator[tuple[str, torch.Tensor]]:
        """One sync round: yields every (name, tensor) the sender broadcasts, in its order.

        Tensors are views into per-bucket buffers owned by the caller once yielded (no copies);
        a caller that keeps none of them past the next one holds at most two buckets at once.
        Consume the iterator to the end: the round is confirmed to the sender only then.
        """
        n = self.round
        self.round += 1
        self.store.set(f"{KEY_PREFIX}/ready/{self.rank}/{n}", "1")
        try:
            size = torch.zeros(1, dtype=torch.int64, device=self.device)
            self._wait(broadcast_root(self.pg, size), n, "header size")
            raw = torch.empty(int(size.item()), dtype=torch.uint8, device=self.device)
            self._wait(broadcast_root(self.pg, raw), n, "header")
            header = WeightSyncHeader.from_json(bytes(raw.cpu().numpy()))
            self.version = header.version
            sizes = header.buckets
            by_bucket: list[list[TensorEntry]] = [[] for _ in sizes]
            for entry in header.tensors:
                by_bucket[entry.bucket].append(entry)
            nxt = self._post(sizes, 0)
            for k in range(len(sizes)):
                buf, work = nxt
                nxt = None
                self._wait(work, n, f"bucket {k}")
                for i, e in enumerate(by_bucket[k]):
                    if i == 1:  # the caller has let go of bucket k - 1's last tensor by now
                        nxt = self._post(sizes, k + 1)
                    dt = getattr(torch, e.dtype)
                    nbytes = math.prod(e.shape) * torch.empty((), dtype=dt).element_size()
                    yield e.name, buf[e.offset : e.offset + nbytes].view(dt).view(e.shape)
                if nxt is None:  # a bucket of one tensor: post the next once it was taken
                    nxt = self._post(sizes, k + 1)
        except RuntimeError as err:  # the sender stopped sending, or died, mid-transfer
            raise WeightSyncError(
                f"weight sync round {n}: receiving from the learner (rank 0) failed or waited "
                f"more than {self.timeout_s:.0f} s (the sender stopped sending or died); check "
                f"learner rank 0's log (RUN_DIR/logs/learner-0.log), or raise "
                f"learner.sync_timeout_s if its link is this slow: {err}"
            ) from err
        self.store.set(f"{KEY_PREFIX}/done/{self.rank}/{n}", "1")

    def receive_all(self) -> tuple[int, dict[str, torch.Tensor]]:
        """One round, collected: (version, {name: tensor})."""
        tensors = dict(self.receive())
        return int(self.version), tensors

    def _wait(self, work, n: int, what: str) -> None:
        wait_peer(work, self, f"the {what} of round {n} from the learner (rank 0)")

    def _post(self, sizes: list[int], k: int):
        if k >= len(sizes):
            return None
        buf = torch.empty(sizes[k], dtype=torch.uint8, device=self.device)
        return buf, broadcast_root(self.pg, buf)

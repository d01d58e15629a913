"""Learner rank 0's side of the weight relay (`learner.weight_transport = "relay"`): one chain
relay (learner/sync/relay.py) carries each new version to every member generator at about the
cost of one transfer, instead of one channel per generator sent in turn (actors/weights/publisher.py).

Epochs. The hub keeps an *epoch*: its members (generator name -> worker count; a generator's
workers take consecutive ranks, each receives the full tensors), and the epoch's `RelaySender`
on a fresh port. Membership changes only at a round boundary (a publish): the generators that
asked to join since (`join`), less the ones that left (`leave`) or that the last round did not
reach (skipped, dead, other bytes). Any change starts a new epoch: a new group (new port, new
ranks), the old sender closed. One rule for gloo and NCCL: an NCCL communicator with a dead rank
must be rebuilt anyway, and after a timed-out gloo wait the group's other pairs are closed.

Rounds. After each `publish(v)` the hub's thread (its own, no Ray thread) makes the boundary,
publishes the announcement (`status`: the epoch's spec and the round's number and version; and
`ANNOUNCE_KEY` in the epoch's store, which the members' watchers wait on), builds the epoch's
sender when new (it waits up to `learner.relay_join_s` for the members' workers to join), and
waits up to `relay_join_s` for the members' ready keys, without rank 0's `WorkLock` (a member
that left meanwhile is not waited for). Then it sends with `drop_missing`: the members ready by
then get the version, the others are left out of the chain and dropped at the next boundary.
Over NCCL only the send holds `WorkLock` (`exclusive`), once for all generators, so a late
member never holds the learner's next step; a version published while the round waited is the
one sent (and announced). Over gloo it sends the CPU copy and overlaps training. A generator asks
`status` from its loop (actors/weights/relay_member.py) and never waits on the hub: the calls answer at
once (rank 0's "control" concurrency group).

A generator joins only after a completed sync on its own channel (it is current), so the first
round it is in carries the next version; one that rank 0 drops, or that falls back on its own,
catches up on its channel and joins again.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

RELAY_BUCKET_BYTES = 16 << 20
"""Chunk size of the relay (learner/sync/relay.py): a receiver holds two chunks above its model,
the sender two staging buffers of it, whatever the generator count."""


ANNOUNCE_KEY = "microcoder/relay-next"
"""`{ANNOUNCE_KEY}/{n}` in an epoch's store: the hub starts round n (its version; -1: the epoch
ended). A member's watcher waits for it (actors/weights/relay_member.py), so it asks `status` at once
instead of at its next poll."""

READY_CHECK_S = 0.02
"""How often a round's wait for its members checks their ready keys (and who left meanwhile)."""


def _tell(sender, n: int, version: int) -> None:
    """Announce round n (of `version`) in the epoch's store, for the members' watchers."""
    try:
        sender.store.set(f"{ANNOUNCE_KEY}/{n}", str(version))
    except Exception as err:  # the members find the round at their next poll all the same
        print(f"relay hub: announcing round {n} failed: {err}", file=sys.stderr)


def _leave_out(sender, n: int) -> None:
    """A failed round n that named no chain (learner/sync/relay.py's key) names an empty one:
    the members that are, or get, ready for it fall back now, not at their own deadline."""
    from microcoder.learner.sync.transport import KEY_PREFIX

    key = f"{KEY_PREFIX}/relay-chain/{n}"
    try:
        if not sender.store.check([key]):
            sender.store.set(key, "[]")
    except Exception:  # they fall back at their own deadline
        pass


def hub_for(publisher, learner_cfg, work) -> RelayHub | None:
    """Rank 0's hub for `learner_cfg` (a LearnerConfig): None unless its weight_transport is
    "relay"; over NCCL its rounds hold `work` (rank 0's WorkLock) as channel sends do."""
    if learner_cfg.weight_transport != "relay":
        return None
    timeout_s = learner_cfg.sync_timeout_s
    return RelayHub(
        publisher,
        timeout_s,
        learner_cfg.relay_join_s,
        exclusive=lambda: work.send(timeout_s, "the relay's members"),
    )


class RelayHub:
    """Epochs and rounds of the relay on learner rank 0, beside `publisher` (a WeightPublisher:
    the newest weights; `publisher.listeners` calls `announce` at each publish).

    `timeout_s`: each wait of a round's transfer (`learner.sync_timeout_s`); `join_s`: how long
    a round waits for its members (`learner.relay_join_s`); `exclusive`: rank 0's
    `WorkLock.send` for a group on the learner's GPU (NCCL), None to send without it."""

    def __init__(
        self,
        publisher,
        timeout_s: float,
        join_s: float,
        exclusive: Callable[[], AbstractContextManager[float]] | None = None,
        bucket_bytes: int = RELAY_BUCKET_BYTES,
    ):
        self.publisher = publisher
        self.timeout_s = timeout_s
        self.join_s = join_s
        self.exclusive = exclusive
        self.bucket_bytes = bucket_bytes
        self._cond = threading.Condition()
        self._members: dict[str, int] = {}  # the epoch's: name -> worker count
        self._joining: dict[str, int] = {}
        self._leaving: set[str] = set()
        self._epoch = 0
        self._spec = None
        self._sender = None
        self._round: dict | None = None  # the announced round: {"n", "version"}
        self.last: dict = {}
        """The last round's outcome: epoch, n, version, delivered (names), failed {name: why}."""
        self.rounds: list[dict] = []
        """Every round's outcome, newest last (at most 100)."""
        self._want = -1
        self._done = -1
        self._closed = False
        self._thread = None
        self._boundary_version = -1  # the version of the last boundary made
        publisher.listeners.append(self.announce)

    # ------------------------------------------------------------ the generators' calls

    def join(self, name: str, workers: int) -> dict[str, Any]:
        """Generator `name` (its engine has `workers` workers) is current on its own channel
        and joins at the next boundary (again, if it was a member: its group is rebuilt)."""
        if workers < 1:
            raise ValueError(f"{name}: a relay member needs at least one worker, got {workers}")
        with self._cond:
            self._joining[name] = int(workers)
            self._leaving.discard(name)
            return {"epoch": self._epoch, "version": self.publisher.version}

    @staticmethod
    def refuse(name: str) -> None:
        raise RuntimeError(
            f"{name} asked to join the weight relay, but learner rank 0 runs with "
            'learner.weight_transport = "channels"; set the same transport for the whole run'
        )

    def leave(self, name: str) -> None:
        """Generator `name` leaves at the next boundary (removed, or gone)."""
        with self._cond:
            self._joining.pop(name, None)
            if name in self._members:
                self._leaving.add(name)

    def status(self, name: str) -> dict[str, Any]:
        """What generator `name` needs, at once: "member" ("in": the epoch's; "pending": joins
        at the next boundary; "out"), the epoch's spec with its ranks, the announced round, the
        last round's outcome, the newest version and the version of the last boundary (a
        pending member whose version is older than one already past a boundary takes it by
        its channel)."""
        with self._cond:
            if name in self._joining:
                member = "pending"
            elif name in self._members and name not in self._leaving and self._spec:
                member = "in"
            else:
                member = "out"
            spec = None
            if member == "in":
                first, workers = self._spec["ranks"][name]
                spec = {**self._spec, "name": name, "first_rank": first, "workers": workers}
                del spec["ranks"]
            return {
                "member": member,
                "epoch": spec,
                "round": self._round if member == "in" else None,
                "last": self.last,
                "latest": self.publisher.version,
                "boundary": self._boundary_version,
            }

    # ------------------------------------------------------------ rounds

    def announce(self, version: int) -> None:
        """A new version was published: the hub's thread makes a round of it."""
        with self._cond:
            self._want = max(self._want, version)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="relay-hub", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            sender = self._sender
            self._sender = None
        if sender is not None:
            _tell(sender, sender.round, -1)  # the members' watchers end (not on a closed store)
            sender.close()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._want > self._done)
                if self._closed:
                    return
                version = self._want
            try:
                version = max(version, self._one_round())
            except Exception as err:  # never leaves the hub without its thread
                print(f"relay hub: round of version {version} failed: {err}", file=sys.stderr)
            self._done = version

    def _one_round(self) -> int:
        """A round of the newest version (returned, as sent): the boundary, the announcement,
        the wait for the members' ready keys without `WorkLock`, then the send, under it over
        NCCL (a late member never holds the learner's next step)."""
        state, version = self.publisher.newest()
        sender = self._boundary(version)
        if sender is None:
            return version
        with self._cond:
            n = self._round["n"]
        _tell(sender, n, version)
        t0 = time.perf_counter()
        try:
            self._ready_wait(sender)
            with self.exclusive() if self._holds_lock(sender) else nullcontext():
                state, version = self._newest(n, state, version)
                stats = sender.send(state.items(), version, drop_missing=True, join_s=0)
            delivered = set(sender.chain)
            failed = {r: "left out" for r in stats.skipped}
        except Exception as err:
            delivered = set(getattr(err, "delivered", []))
            failed = dict(getattr(err, "failed", {}))
            _leave_out(sender, n)  # nothing sent (no lock in time, nobody ready)? not waited for
            print(f"relay hub: round {n} of epoch {self._epoch}: {err}", file=sys.stderr)
        self._settle(n, version, delivered, failed, time.perf_counter() - t0)
        return version

    def _holds_lock(self, sender) -> bool:
        """The send holds rank 0's WorkLock: a group on the learner's GPU (NCCL)."""
        return self.exclusive is not None and sender.device.type != "cpu"

    def _ready_wait(self, sender) -> None:
        """Wait up to join_s for the members' ready keys (no lock held); ends early once every
        member not ready has left (a generator removed mid-round is not waited for). It checks
        the keys every READY_CHECK_S: a store wait that times out logs a c10d warning each time."""
        deadline = time.monotonic() + self.join_s
        while missing := set(sender.wait_ready(0)):
            if time.monotonic() >= deadline:
                return
            with self._cond:
                ranks = self._spec["ranks"] if self._spec else {}
                staying = {
                    r
                    for name, (first, workers) in ranks.items()
                    if name not in self._leaving
                    for r in range(first, first + workers)
                }
            if not missing & staying:
                return
            time.sleep(READY_CHECK_S)

    def _newest(self, n: int, state: dict, version: int) -> tuple[dict, int]:
        """The weights to send in round n (under the lock, so no publish runs meanwhile): a
        version published while the round waited for its members replaces the announced one,
        and the announcement says so. Every member in the chain gets the same bytes."""
        newer, latest = self.publisher.newest()
        if latest <= version:
            return state, version
        with self._cond:
            if self._round is not None and self._round["n"] == n:
                self._round = {"n": n, "version": latest}
        print(f"relay hub: round {n} sends version {latest} (announced {version})", flush=True)
        return newer, latest

    def _boundary(self, version: int):
        """Apply the membership changes; a changed membership starts a new epoch (its group
        built here, waiting up to join_s). Returns the epoch's sender, None without members."""
        from microcoder.learner.distributed import free_port

        with self._cond:
            self._boundary_version = version
            members = {n: w for n, w in self._members.items() if n not in self._leaving}
            changed = bool(self._joining) or members != self._members or self._sender is None
            members.update(self._joining)
            self._joining.clear()
            self._leaving.clear()
            if not changed:
                self._round = {"n": self._sender.round, "version": version}
                return self._sender
            old = self._sender
            self._sender = None
            self._members = members
            self._spec = None
            self._round = None
            if members:
                self._epoch += 1
                self._spec = self._epoch_spec(members, free_port(self.publisher.host))
                self._round = {"n": 0, "version": version}
            spec = self._spec
        if old is not None:
            _tell(old, old.round, -1)  # its members' watchers ask for the new epoch at once
            old.close()
        if spec is None:
            return None
        return self._build(spec)

    def _epoch_spec(self, members: dict[str, int], port: int) -> dict[str, Any]:
        ranks = {}
        first = 1
        for name, workers in members.items():
            ranks[name] = (first, workers)
            first += workers
        return {
            "epoch": self._epoch,
            "host": self.publisher.host,
            "port": port,
            "world": first,
            "ranks": ranks,
            "timeout_s": self.timeout_s,
            "device": self.publisher.device,
        }

    def _build(self, spec: dict[str, Any]):
        """The epoch's sender, once every member's workers joined (within join_s); when one
        did not, the epoch ends and every member is dropped (each rejoins from its channel)."""
        from microcoder.learner.sync.relay import RelaySender

        try:
            sender = RelaySender(
                spec["host"],
                spec["port"],
                spec["world"] - 1,
                timeout_s=self.timeout_s,
                join_timeout_s=self.join_s,
                bucket_bytes=self.bucket_bytes,
                device=self.publisher.device,
            )
        except Exception as err:
            print(f"relay hub: epoch {spec['epoch']} was not formed: {err}", file=sys.stderr)
            with self._cond:
                if self._spec is spec:
                    failed = {name: f"epoch not formed: {err}"[:300] for name in self._members}
                    self.last = self._outcome(spec["epoch"], 0, -1, [], failed, 0.0)
                    self._members = {}
                    self._spec = None
                    self._round = None
            return None
        with self._cond:
            if self._spec is not spec or self._closed:
                sender.close()
                return None
            self._sender = sender
        return sender

    def _settle(self, n: int, version: int, delivered: set, failed: dict, seconds: float):
        """Record round n's outcome by member name; the members it did not reach are dropped at
        the next boundary."""
        with self._cond:
            ranks = self._spec["ranks"] if self._spec else {}
            got = []
            missed = {}
            for name, (first, workers) in ranks.items():
                mine = range(first, first + workers)
                if all(r in delivered for r in mine):
                    got.append(name)
                    continue
                why = [failed[r] for r in mine if r in failed] or ["not delivered"]
                missed[name] = str(why[0])[:300]
                self._leaving.add(name)
            self.last = self._outcome(self._epoch, n, version, got, missed, seconds)
        print(  # one line per round in rank 0's log
            f"relay hub: epoch {self.last['epoch']} round {n}: version {version} to "
            f"{', '.join(got) or 'nobody'} in {seconds:.2f} s"
            + (f"; not to {', '.join(f'{k} ({v})' for k, v in missed.items())}" if missed else ""),
            flush=True,
        )

    def _outcome(self, epoch, n, version, delivered, failed, seconds) -> dict[str, Any]:
        out = {
            "epoch": epoch,
            "n": n,
            "version": version,
            "delivered": sorted(delivered),
            "failed": failed,
            "seconds": seconds,
        }
        self.rounds.append(out)
        del self.rounds[:-100]
        return out

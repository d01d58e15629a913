"""A generator's side of the weight relay (`learner.weight_transport = "relay"`; rank 0's side:
actors/weights/relay_hub.py). The generator's loop calls `RelayMember.step` at its ticks; it never
blocks the loop on rank 0:

1. After a completed sync on its own channel (at start, after a restart, after a `scale` add:
   the generator is current), `joined_after_channel_sync` asks rank 0 to take it into the
   relay (`join_relay`); it is a member from the next version on.
2. At its version polls (`generator.weight_poll_s`) it asks rank 0's `relay_status` (answers at
   once), and at its next tick when its watcher (a thread waiting in the epoch's store) sees
   rank 0 announce the next round or end the epoch. A round of a newer version in a new epoch:
   its workers join the epoch's group (`mc_open_relay`, on a thread: the loop goes on handing
   in groups). Then it sets its ready keys in the epoch's store and waits, at every tick, for
   rank 0's chain of the round (a key check, no call to rank 0; rank 0 names the chain once it
   may send, over NCCL once it holds `WorkLock`). The loop leases nothing meanwhile (`busy`).
3. The chain names it: the caller pauses the engine and `receive`s (the workers load the round
   bucket by bucket, `mc_relay_receive_and_load`); the engine paused only once rank 0 sends.
   The chain left it out (it was late), or rank 0 dropped it, or a deadline passed: it falls
   back to its own channel (`step` says "channel"), and joins again after that sync; after two
   or more fallbacks in a row it first sits out more versions (`BACKOFF_AFTER`).
4. A receive that failed once it began raises `WeightsMixedError` (the load streams: the
   engine may hold part of the new weights), as a channel's does; so does a round rank 0 did not
   confirm for it (other bytes), seen at the next poll.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import timedelta
from typing import Any

from microcoder.actors.deadline import get_within
from microcoder.actors.weights.publisher import LEARNER0, LEARNER0_REMEDY, WeightsMixedError
from microcoder.actors.weights.relay_hub import ANNOUNCE_KEY

CHANNEL = "channel"
IDLE = "idle"
WAIT = "wait"
RECEIVE = "receive"
"""What `RelayMember.step` tells the caller: sync over the own channel now; nothing to do;
a round is under way (hold leases, check again next tick); receive the round now."""

MARGIN_S = 5.0
"""Added to rank 0's own waits before a member gives up on a round and falls back."""

BACKOFF_AFTER = 2
BACKOFF_MAX = 16
"""A member that fell back `BACKOFF_AFTER` or more times in a row (no relay round loaded between)
sits out versions before it joins again: min(2 ** (k - BACKOFF_AFTER), BACKOFF_MAX) after its
k-th (1, 2, 4, 8, 16, 16, ...; `backoff_versions`), syncing them on its own channel. A
chronically late member so stops costing every round its join wait and a new epoch."""

LEAVE_S = 5.0
"""How long a generator shutting down waits for rank 0 to take its `leave_relay`."""


def backoff_versions(in_a_row: int) -> int:
    """Versions a member sits out after its `in_a_row`-th fallback in a row (BACKOFF_AFTER)."""
    if in_a_row < BACKOFF_AFTER:
        return 0
    return min(2 ** (in_a_row - BACKOFF_AFTER), BACKOFF_MAX)


class _Watch(threading.Thread):
    """Waits in the epoch's store for rank 0's announcement of round `n` (relay_hub.py
    `ANNOUNCE_KEY`, set as the round starts), so that the member asks `relay_status` at its next
    tick instead of its next poll; fires too when the store is gone (the epoch ended)."""

    SLICE_S = 300.0
    """One wait on the key (a timed-out wait logs a c10d warning: so, long). A stopped watcher
    ends when the key comes (the next round, or the epoch's end) or after this."""

    def __init__(self, spec: dict, n: int):
        super().__init__(name=f"relay-watch-{spec['epoch']}-{n}", daemon=True)
        self.spec = spec
        self.n = n
        self.fired = threading.Event()
        self.stopped = threading.Event()

    def run(self) -> None:
        import torch.distributed as dist

        key = f"{ANNOUNCE_KEY}/{self.n}"
        slice_ = timedelta(seconds=self.SLICE_S)
        try:
            store = dist.TCPStore(
                self.spec["host"], self.spec["port"], is_master=False, timeout=timedelta(seconds=30)
            )
            while not self.stopped.is_set():
                try:
                    store.wait([key], slice_)
                    break
                except RuntimeError:  # past the slice: raises instead when the store is gone
                    store.check([key])
        except Exception:  # the store is gone: the epoch ended, ask rank 0 now
            pass
        if not self.stopped.is_set():
            self.fired.set()


class _Join(threading.Thread):
    """The workers joining an epoch's group (`mc_open_relay` blocks until every member's
    workers joined, up to rank 0's `relay_join_s`)."""

    def __init__(self, engine, spec: dict, round_: dict):
        super().__init__(name=f"relay-join-{spec['epoch']}", daemon=True)
        self.engine = engine
        self.spec = spec
        self.round = round_
        self.error = None
        self.started = time.monotonic()

    def run(self) -> None:
        try:
            self.engine.collective_rpc("mc_open_relay", args=(self.spec,))
        except BaseException as err:
            self.error = err


class RelayMember:
    """Generator `name`'s membership of the relay; `cfg` the run's LearnerConfig, `poll_s`
    how often it asks rank 0 (`generator.weight_poll_s`)."""

    def __init__(self, name: str, cfg, poll_s: float):
        self.name = name
        self.cfg = cfg
        self.poll_s = poll_s
        self.asked = False  # asked to join since its last fallback
        self.epoch: int | None = None  # the epoch its workers joined
        self.joining: _Join | None = None
        self.waiting: dict | None = None  # the round it is ready for: n, version, ranks, since
        self.checking: tuple[int, int] | None = None  # (epoch, n) received, not yet confirmed
        self.store = None
        self.polled = float("-inf")
        self.behind_since: float | None = None
        self.fallbacks = 0
        self.rounds = 0
        self.last_fallback = ""
        self.round_s = 2 * cfg.relay_join_s + MARGIN_S  # rank 0: the build, then the ready wait
        self.watch: _Watch | None = None  # for the next round's announcement
        self.spec: dict | None = None  # the epoch its workers joined
        self.version = -1  # the generator's, at the last step
        self.in_row = 0
        self.rejoin_at = -1  # fallbacks in a row; the backoff's first version

    @property
    def busy(self) -> bool:
        """A round is under way for it (or announced): the loop leases nothing and asks every
        tick."""
        return self.waiting is not None or self.joining is not None or self._announced()

    def _announced(self) -> bool:
        return self.watch is not None and self.watch.fired.is_set()

    def _watch(self, spec: dict, n: int) -> None:
        """Watch for round n of `spec`'s epoch (a watcher already on it is kept)."""
        w = self.watch
        if w is not None and (w.spec["epoch"], w.n) == (spec["epoch"], n):
            return
        self._unwatch()
        self.watch = _Watch(spec, n)
        self.watch.start()

    def _unwatch(self) -> None:
        if self.watch is not None:
            self.watch.stopped.set()
            self.watch = None

    def _ask(self, ref, what: str):
        return get_within(ref, self.cfg.sync_timeout_s, what, LEARNER0, LEARNER0_REMEDY)

    def joined_after_channel_sync(self, engine, rank0, version: int) -> None:
        """The generator completed a sync on its own channel, to `version`: join the relay
        (once; not before `rejoin_at` while it backs off, `BACKOFF_AFTER`)."""
        if self.asked or version < self.rejoin_at:
            return
        try:
            workers = len(engine.collective_rpc("mc_relay_worker"))
            self._ask(rank0.join_relay.remote(self.name, workers), "join_relay")
        except Exception as err:  # the weights loaded all the same; asked again after the next
            print(f"{self.name}: joining the weight relay failed: {err}", file=sys.stderr)
            return
        self.asked = True
        self.polled = float("-inf")

    def summary(self) -> dict[str, Any]:
        """For the generator's stats: relay rounds loaded, fallbacks to the channel, the last
        fallback's reason, and whether it is (asked to be) a member now."""
        return {
            "member": self.asked,
            "epoch": self.epoch,
            "rounds": self.rounds,
            "fallbacks": self.fallbacks,
            "last_fallback": self.last_fallback,
        }

    def step(self, engine, rank0, version: int) -> str:
        """One tick (never blocks on rank 0 beyond an answer-at-once status call): CHANNEL,
        IDLE, WAIT or RECEIVE (then call `receive(engine)` with the engine paused). It asks
        rank 0 every `poll_s`, and at once when its watcher saw a round announced."""
        self.version = version
        if not self.asked:
            return CHANNEL
        if self.joining is not None:
            return self._joined()
        if self.waiting is not None:
            return self._chain_says()
        now = time.monotonic()
        if self._announced():
            self._unwatch()
        elif now - self.polled < self.poll_s:
            return IDLE
        self.polled = now
        st = self._ask(rank0.relay_status.remote(self.name), "relay_status")
        self._check_confirmed(st["last"])
        if st["member"] == "out":
            return self.fall_back(
                "learner rank 0 does not count it a member (dropped, or restarted)"
            )
        if st["member"] == "pending" and st["latest"] > version and st["boundary"] >= st["latest"]:
            return CHANNEL  # joined after the newest version's boundary: it comes by its channel
        rnd = st["round"]
        spec = st["epoch"]
        if st["member"] == "pending" or rnd is None or rnd["version"] <= version:
            if rnd is not None and spec["epoch"] == self.epoch:
                self._watch(spec, rnd["n"] + 1)
            return self._behind(st["latest"] > version, now)
        self.behind_since = None
        if self.epoch != spec["epoch"]:
            self.joining = _Join(engine, spec, rnd)
            self.joining.start()
            return WAIT
        return self._ready(spec, rnd)

    def _behind(self, behind: bool, now: float) -> str:
        """No round for a newer version yet: wait for one (the hub makes it right after the
        publish), up to rank 0's own waits; then fall back to the channel."""
        if not behind:
            self.behind_since = None
            return IDLE
        self.behind_since = self.behind_since or now
        if now - self.behind_since > self.round_s + self.cfg.sync_timeout_s:
            return self.fall_back("no relay round carried the newest version in time")
        return IDLE

    def _joined(self) -> str:
        join = self.joining
        if join.is_alive():
            if time.monotonic() - join.started > self.round_s:
                return self.fall_back("its workers did not join the epoch's group in time")
            return WAIT
        self.joining = None
        if join.error is not None:
            why = f"{type(join.error).__name__}: {str(join.error)[:300]}"
            return self.fall_back(f"joining relay epoch {join.spec['epoch']} failed: {why}")
        self.epoch = join.spec["epoch"]
        self._close_store()
        return self._ready(join.spec, join.round)

    def _ready(self, spec: dict, rnd: dict) -> str:
        """Set this member's ready keys for round rnd["n"] (rank 0 puts it in the chain)."""
        from microcoder.learner.sync.transport import KEY_PREFIX

        self._unwatch()
        store = self._store(spec)
        self.spec = spec
        first = spec["first_rank"]
        workers = spec["workers"]
        for r in range(first, first + workers):
            store.set(f"{KEY_PREFIX}/relay-ready/{r}/{rnd['n']}", "1")
        self.waiting = {**rnd, "first": first, "since": time.monotonic()}
        return WAIT

    def _chain_says(self) -> str:
        from microcoder.learner.sync.transport import KEY_PREFIX

        w = self.waiting
        key = f"{KEY_PREFIX}/relay-chain/{w['n']}"
        if not self.store.check([key]):  # rank 0 names the chain once it holds WorkLock
            if time.monotonic() - w["since"] > self.round_s + self.cfg.sync_timeout_s:
                return self.fall_back(f"learner rank 0 did not start relay round {w['n']} in time")
            return WAIT
        if w["first"] in json.loads(self.store.get(key).decode()):
            return RECEIVE
        return self.fall_back(f"left out of relay round {w['n']} (not ready when it started)")

    def receive(self, engine) -> dict[str, Any]:
        """Receive and load the round the chain named it for (the engine paused). Returns its
        timings and new version; a failure raises `WeightsMixedError` and falls back."""
        w = self.waiting
        t0 = time.perf_counter()
        try:
            out = engine.collective_rpc("mc_relay_receive_and_load", args=(w["n"],))
            version, count, receive_s, reload_s = out[0]
        except Exception as err:
            self.fall_back(f"relay round {w['n']} failed: {type(err).__name__}")
            raise WeightsMixedError(
                f"{self.name}: the relay load of round {w['n']} failed after it may have begun, "
                f"so the engine may hold part of the new weights: {type(err).__name__}: {err}"
            ) from err
        self.waiting = None
        self.checking = (self.epoch, w["n"])
        self.rounds = self.rounds + 1
        self.in_row = 0
        self.version = int(version)
        self._watch(self.spec, w["n"] + 1)
        t1 = time.perf_counter()
        return {
            "version": int(version),
            "tensors": int(count),
            "transport": "relay",
            "epoch": self.epoch,
            "round": w["n"],
            "ready_s": t0 - w["since"],  # ready, until rank 0 sent (the engine generating)
            "receive_s": receive_s,
            "reload_s": reload_s,
            "transfer_s": t1 - t0,
        }

    def _check_confirmed(self, last: dict) -> None:
        """Rank 0's outcome of the last round this member loaded: not delivered (other bytes,
        or rank 0's fingerprints disagree) means its weights are not the version's."""
        if self.checking is None or not last:
            return
        if (last["epoch"], last["n"]) < self.checking:
            return
        if (last["epoch"], last["n"]) == self.checking and self.name not in last["delivered"]:
            why = last["failed"].get(self.name, "not confirmed")
            self.checking = None
            self.fall_back(f"rank 0 did not confirm its round: {why}")
            raise WeightsMixedError(
                f"{self.name}: learner rank 0 did not confirm the relay round it loaded ({why}); "
                "its weights may not be that version's"
            )
        self.checking = None

    def fall_back(self, why: str) -> str:
        """Leave the relay on this side: the next sync goes over the own channel, after which
        it joins again (after `backoff_versions` more when it fell back often in a row).
        Returns CHANNEL."""
        self.asked = False
        self.epoch = None
        self.joining = None
        self.waiting = None
        self.behind_since = None
        self._close_store()
        self._unwatch()
        self.fallbacks = self.fallbacks + 1
        self.in_row = self.in_row + 1
        self.last_fallback = why
        wait = backoff_versions(self.in_row)
        self.rejoin_at = self.version + 1 + wait
        backoff = (
            f"; fell back {self.in_row} times in a row: sits out {wait} version(s), joins "
            f"again from version {self.rejoin_at}"
            if wait
            else ""
        )
        print(
            f"{self.name}: weight relay: {why}; syncing on its own channel{backoff}",
            file=sys.stderr,
        )
        return CHANNEL

    def leave(self, rank0) -> None:
        """The generator shuts down (`scale` removed it): rank 0 takes it out of the next epoch.
        Waits for the answer (within LEAVE_S), so that killing the process next loses nothing."""

        self._unwatch()
        try:
            ref = rank0.leave_relay.remote(self.name)
            get_within(ref, LEAVE_S, "leave_relay", LEARNER0, "it is dropped at a deadline")
        except Exception as err:  # it is dropped at the next round's deadline instead
            print(f"{self.name}: leaving the weight relay failed: {err}", file=sys.stderr)

    def _store(self, spec: dict):
        if self.store is None:
            import torch.distributed as dist

            self.store = dist.TCPStore(
                spec["host"],
                spec["port"],
                is_master=False,
                timeout=timedelta(seconds=self.cfg.sync_timeout_s),
            )
        return self.store

    def _close_store(self) -> None:
        self.store = None

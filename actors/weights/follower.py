"""`WeightFollower`: the generator's half of a weight update. It decides when to ask (the loop's
tick, at most every `generator.weight_poll_s`; right after a lease; now, for an eval), holds a
version for a held-out eval, keeps a failed load's mixed weights from being sampled, and loads
each `Round` its `WeightSource` (source.py) hands out into the engine: pause, receive,
relabel, resume (actors/weights/publisher.py `update_engine`). It never knows whether a round
came by channel or by relay. Under `learner.lora` a round is an adapter: it is loaded beside the
versions the engine serves, without a pause (`update_adapter`; actors/engines/adapters.py).

Its host is the generator (actors/generator.py): the follower reads the host's `name`,
`settings`, `engine` and `version`, and writes the version it loaded and the sync's timings
(`timer`, `pause_s`, `syncs`) back there; the generator keeps no weight-sync state of its own.

A load that failed after it began leaves the engine's weights mixed (the worker loads bucket by
bucket): `mixed` stays set, the loop sees version -1, and every later update failure ends the
loop too (`WeightsMixedError`), until a sync completes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from microcoder.actors.deadline import actor_by_name
from microcoder.actors.weights.publisher import (
    LEARNER0,
    WeightsMixedError,
    update_adapter,
    update_engine,
)
from microcoder.actors.weights.source import Round, WeightSource, weight_source


class WeightFollower:
    """`learner0`: learner rank 0's Ray actor name (None: no weight syncs; the polls and syncs
    are no-ops). `source`: None builds the one `learner.weight_transport` names."""

    def __init__(self, host, learner0: str | None, source: WeightSource | None = None):
        self.host = host
        self.learner0 = learner0
        self.rank0_handle = None  # rank 0's handle, looked up by name at the first sync
        self.source: WeightSource = source if source is not None else self._new_source()
        self.mixed = False
        """A load failed after it began: the engine's weights may be part new, part old."""
        self.held: int | None = None
        """hold_weights: the version a held-out eval samples at."""
        self.last_poll = float("-inf")
        self.lock = threading.Lock()  # a weight update and eval sampling never overlap

    def _new_source(self) -> WeightSource:
        return weight_source(self.host.name, self.host.settings, self.rank0)

    # ------------------------------------------------------------ the loop's calls

    def poll(self, throttled: bool = True) -> bool:
        """The loop's tick: at most every `generator.weight_poll_s` (every call when not
        `throttled`: right after a lease, whose prompts must start on the newest weights), ask
        the learner's version and take newer weights. Skips while eval sampling holds the
        weights (the next tick asks again). A round under way (a send asked of rank 0 and not
        yet ready, a relay round) is checked at every tick without waiting: the loop goes on
        handing in groups meanwhile (and leases none: `under_way`)."""
        if self.learner0 is None:
            return False
        if self.mixed:  # nothing may be sampled before a sync completes: no throttle, no skip
            return self.sync_now()
        if self.held is not None:  # a held-out eval samples at this version (hold)
            return False
        now = time.monotonic()
        poll_s = self.host.settings.generator.weight_poll_s
        if throttled and not self.under_way() and now - self.last_poll < poll_s:
            return False
        if not self.lock.acquire(blocking=False):
            return False
        try:
            self.last_poll = now
            return self._update_locked(block=False)
        finally:
            self.lock.release()

    def sync_now(self) -> bool:
        """Take the learner's newest weights now if they are newer than ours (any thread);
        not while a held-out eval holds this version (`hold`)."""
        if self.learner0 is None or (self.held is not None and not self.mixed):
            return False
        with self.lock:
            return self._update_locked()

    def hold(self) -> int:
        """Take the learner's newest weights now, then keep them, taking no newer ones, until
        `release`. Returns the version held."""
        with self.lock:
            if self.learner0 is not None:
                self._update_locked()
            self.held = self.host.version
            print(f"{self.host.name}: holding version {self.held} for a held-out eval", flush=True)
            return self.host.version

    def release(self) -> None:
        """End `hold`: the loop's next tick takes the newest weights."""
        if self.held is not None:
            print(f"{self.host.name}: released version {self.held} (the eval ended)", flush=True)
        self.held = None

    def under_way(self) -> bool:
        """A round is under way (asked of rank 0, or a relay round): lease nothing, check it at
        every tick."""
        return self.source.under_way()

    @contextmanager
    def sampling(self) -> Iterator[None]:
        """The weight lock, for sampling outside the loop. A round others wait on (a relay
        chain this generator is in) is received first."""
        with self.lock:
            if self.source.owes_a_round():
                self._update_locked()
            yield

    def restart(self, rebuild: Callable[[], None]) -> None:
        """A new engine: under the weight lock, forget every round and channel (new workers
        join again), hold nothing (its loop syncs first), and `rebuild()` the engine."""
        with self.lock:
            self.mixed = False
            self.held = None
            self.source = self._new_source()
            rebuild()

    def summary(self) -> dict[str, Any]:
        return self.source.summary()

    def leave(self) -> None:
        """Shutting down: out of the transport's next round (only when rank 0 was ever asked)."""
        if self.rank0_handle is not None:
            self.source.leave(self.rank0_handle)

    # ------------------------------------------------------------ one update

    def _update_locked(self, block: bool = True) -> bool:
        """Once rank 0 is ready to send: inflight: pause("keep"), between_groups: pause("wait")
        (vLLM finishes the requests in flight on the old weights; nothing is leased meanwhile,
        the loop is here); then the load (actors/weights/publisher.py `update_engine`). The engine
        resumes even when the load fails."""
        from microcoder.actors.generate_loop import caused_by

        try:
            updated = self._update_unchecked(block)
        except Exception as err:
            if not (self.mixed or caused_by(err, lambda e: isinstance(e, WeightsMixedError))):
                raise
            self.mixed = True
            raise WeightsMixedError(
                f"{self.host.name}: a weight load failed after it began, so the engine's weights "
                "may be part new, part old; nothing is sampled on them until a sync completes "
                "(the pool restarts this generator's loop, which syncs first)"
            ) from err
        self.mixed = False
        return updated

    def _update_unchecked(self, block: bool = True) -> bool:
        """`block` False (the loop's tick): a round not yet ready returns False at once, and the
        next tick checks again (unthrottled); True waits for it."""
        host = self.host
        round_ = self.source.next_round(host.engine, host.version, block)
        if round_ is None:
            return False
        loaded = self._load(round_)
        if loaded and round_.loaded is not None:
            round_.loaded(host.engine, host.version)
        return loaded

    def _load(self, round_: Round) -> bool:
        """Pause the engine, receive the round, relabel, resume (actors/weights/publisher.py
        `update_engine`); True when new weights were loaded."""

        host = self.host
        what = f"{host.name}: weight update to version {round_.what}"
        if getattr(host.engine, "adapters", None) is not None:  # LoRA: no pause
            mode = "adapter"
            with host.timer.sync():
                result, pause_s = update_adapter(host.engine, round_.receive, what)
            if result is not None:
                served = ", ".join(f"v{v}" for v in sorted(host.engine.adapters.served))
                print(
                    f"{host.name}: adapter v{result['version']} loaded ({result['bytes']} bytes, "
                    f"{result['sync_s']:.3f} s, no pause); serving {served}",
                    flush=True,
                )
        else:
            mode = "keep" if host.settings.generator.weight_update == "inflight" else "wait"
            with host.timer.sync():
                result, pause_s = update_engine(
                    host.engine, mode, round_.receive, what, host.settings.generator.inflight_kv
                )
        host.pause_s.append(pause_s)
        del host.pause_s[:-1000]
        if result is None:
            return False
        host.version = result["version"]
        host.syncs.append({**result, "pause_s": pause_s, "mode": mode})
        return True

    def rank0(self):
        """Learner rank 0's actor handle, looked up by its name once (within
        learner.sync_timeout_s, naming rank 0 when it is not found)."""

        if self.rank0_handle is None:
            self.rank0_handle = actor_by_name(
                self.learner0,
                self.host.settings.learner.sync_timeout_s,
                LEARNER0,
                "it is not running (it failed to start or died: see its log), or this generator "
                "was given another name than LearnerGroup.rank0_name",
            )
        return self.rank0_handle

"""A pool of replicas of one actor kind (generators or executors): start, scale, supervise.

Each replica runs its loop (`run()`) as a long Ray task. Supervision (`check()`, called by the
driver every step): a loop that ended with an actor error means the process died; Ray restarts
the actor (max_restarts), the pool returns the dead replica's leases to the buffer (its prompts or
groups are re-queued, none lost), waits for the new process to be ready and starts its loop again.
A generator always pulls the newest weights before its first wave, so a restarted or added
replica never samples with stale weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Replica:
    name: str
    handle: Any
    loop: Any = None
    restarts: int = 0
    started: float = field(default_factory=time.time)


class Pool:
    """Replicas named `{kind}-{i}`; `make(name)` creates one actor handle (not yet ready)."""

    def __init__(
        self, kind: str, make: Callable[[str], Any], release: Callable[[str], Any], log=print
    ):
        self.kind, self.make, self.release, self.log = kind, make, release, log
        self.replicas: dict[str, Replica] = {}
        self._next = 0
        self.errors: list[str] = []

    def __len__(self) -> int:
        return len(self.replicas)

    def handles(self) -> list[Any]:
        return [r.handle for r in self.replicas.values()]

    def add(self, n: int, before_loop: Callable[[Any], None] | None = None) -> list[str]:
        """Start `n` replicas, wait until ready, then start their loops."""
        import ray

        new = []
        for _ in range(n):
            name = f"{self.kind}-{self._next}"
            self._next += 1
            new.append(Replica(name, self.make(name)))
        ray.get([r.handle.ready.remote() for r in new])
        for r in new:
            if before_loop is not None:
                before_loop(r.handle)
            r.loop = r.handle.run.remote()
            self.replicas[r.name] = r
        return [r.name for r in new]

    def remove(self, n: int, timeout_s: float = 60.0) -> list[str]:
        """Stop the `n` newest replicas: finish their current wave, return leases, shut down."""
        import ray

        victims = list(self.replicas.values())[-n:] if n > 0 else []
        for r in victims:
            r.handle.stop.remote()
        for r in victims:
            try:
                ray.get(r.loop, timeout=timeout_s)
            except Exception as err:
                self.log(f"{r.name}: did not stop cleanly ({err}); killing it")
            self.shutdown_replica(r)
            del self.replicas[r.name]
        return [r.name for r in victims]

    def scale_to(self, n: int, before_loop=None) -> tuple[list[str], list[str]]:
        """Add or remove replicas until there are `n`; returns (added, removed)."""
        if n > len(self):
            return self.add(n - len(self), before_loop), []
        if n < len(self):
            return [], self.remove(len(self) - n)
        return [], []

    def check(self, before_loop=None) -> list[str]:
        """Restart the loops of replicas whose process died; returns what was done."""
        import ray

        events = []
        loops = {r.loop: r for r in self.replicas.values() if r.loop is not None}
        if not loops:
            return events
        done, _ = ray.wait(list(loops), num_returns=len(loops), timeout=0)
        for ref in done:
            r = loops[ref]
            try:
                ray.get(ref)
                r.loop = None  # the loop ended by itself (stopped, or the data is done)
                continue
            except Exception as err:
                reason = str(err).splitlines()[0][:200]
            released = self.release(r.name)
            r.restarts += 1
            msg = f"{r.name} died ({reason}); returned its leases ({released}); restarting (restart #{r.restarts})"
            self.log(msg)
            self.errors.append(msg)
            try:
                ray.get(r.handle.ready.remote(), timeout=600)
                if before_loop is not None:
                    before_loop(r.handle)
                r.loop = r.handle.run.remote()
                events.append(f"{r.name} restarted")
            except Exception as err:
                self.errors.append(f"{r.name} could not restart: {err}")
                r.loop = None
        return events

    def stats(self, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        import ray

        refs = {name: r.handle.stats.remote() for name, r in self.replicas.items()}
        out = []
        for name, ref in refs.items():
            try:
                out.append(
                    {**ray.get(ref, timeout=timeout_s), "restarts": self.replicas[name].restarts}
                )
            except Exception as err:
                out.append({"name": name, "error": str(err).splitlines()[0][:200]})
        return out

    def shutdown_replica(self, r: Replica) -> None:
        import ray

        try:
            ray.get(r.handle.shutdown.remote(), timeout=30)
        except Exception:
            pass
        ray.kill(r.handle, no_restart=True)

    def shutdown(self) -> None:
        import ray

        for r in self.replicas.values():
            r.handle.stop.remote()
        for r in self.replicas.values():
            if r.loop is not None:
                try:
                    ray.get(r.loop, timeout=60)
                except Exception:
                    pass
            self.shutdown_replica(r)
        self.replicas.clear()

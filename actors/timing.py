"""Where an actor's wall time goes: busy (its real work), idle (waiting for input), io (talking
to the buffer), sync (weight updates). The dashboard's idle fraction per pool comes from here."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("busy", "idle", "io", "sync")


class PoolTimer:
    """Accumulates seconds per phase; thread-safe enough for one worker thread + stat readers."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.started = time.monotonic()

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] += time.monotonic() - t0

    def busy(self):
        return self._phase("busy")

    def idle(self):
        return self._phase("idle")

    def io(self):
        return self._phase("io")

    def sync(self):
        return self._phase("sync")

    @property
    def busy_s(self) -> float:
        return self.seconds["busy"]

    def per_busy_s(self, count: float) -> float:
        """`count` per busy second (0 before any busy time): a replica's throughput."""
        busy = self.busy_s
        return count / busy if busy else 0.0

    def summary(self) -> dict[str, float]:
        """Seconds per phase and the idle fraction of the wall time since start."""
        wall = max(time.monotonic() - self.started, 1e-9)
        out = {f"{k}_s": round(v, 4) for k, v in self.seconds.items()}
        out["wall_s"] = round(wall, 4)
        out["idle_frac"] = round(self.seconds["idle"] / wall, 4)
        return out

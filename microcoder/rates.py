"""Per-second rates of cumulative totals, one class for every place that reports them: the
training loop's pool rates (generated tokens/s, tests/s: plain rates between two steps) and the
buffer's counter rates in its stats (smoothed, at most once a second; buffer/accounting.py).

It sits at the bottom (standard library only) because launch/ and buffer/ both use it and
buffer/ may not import launch/ (docs/architecture.md, section 2).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping


class Rates:
    """Per-second rates of totals that only grow, from their change between two updates.

    alpha = 1 (the default) gives the plain rate since the key's previous update; alpha < 1 an
    exponentially weighted moving average of those rates (alpha is the newest one's weight).
    With min_interval_s > 0, an update sooner than that after the key's previous one is ignored
    (the rate and its reference point stay). The first update of a key only sets its reference
    point (its rate is 0), and a total that went down (a replica restarted or was removed, so its
    counter began again) counts as no change. Each key keeps its own time.
    """

    def __init__(self, keys: Iterable[str] = (), alpha: float = 1.0, min_interval_s: float = 0.0):
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"Rates: alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self.min_interval_s = min_interval_s
        self.rates: dict[str, float] = dict.fromkeys(keys, 0.0)
        """The newest rate per key (per second); keys given at construction start at 0."""
        self._last: dict[str, tuple[float, float]] = {}

    def rate(self, key: str, total: float, now: float | None = None) -> float:
        """Update `key` with its cumulative `total` at `now` (default: time.monotonic()) and
        return its rate per second."""
        now = time.monotonic() if now is None else now
        prev = self._last.get(key)
        if prev is None:
            self._last[key] = (now, total)
            return self.rates.setdefault(key, 0.0)
        dt = now - prev[0]
        if self.min_interval_s > 0 and 0 <= dt < self.min_interval_s:
            return self.rates[key]
        self._last[key] = (now, total)
        inst = max(total - prev[1], 0) / dt if dt > 0 else 0.0
        self.rates[key] = self.alpha * inst + (1 - self.alpha) * self.rates.get(key, 0.0)
        return self.rates[key]

    def update(self, now: float, totals: Mapping[str, float]) -> dict[str, float]:
        """`rate` for every key of `totals` at one time `now`; returns all rates."""
        for key, total in totals.items():
            self.rate(key, total, now)
        return self.rates

"""Counters that prove no group is lost, plus the rates the dashboard charts.

A group slot opens when a prompt is issued and moves through four stages:
    leased    prompt handed to a generator, group not yet back
    unscored  group waiting for an executor
    scoring   group leased to an executor
    scored    group waiting for the learner
and ends exactly once as consumed, dropped_stale or failed (failed includes prompt leases that
were released or expired: their prompt is re-queued and issued again as a new slot).
A consumed group may later be reported `filtered` by the learner (dynamic filtering: it was
delivered but not trained on); it stays consumed, and `trained = consumed - filtered` is what
admission control counts.

Invariants (checked by `invariant_violations`, exposed in stats):
    issued = consumed + dropped_stale + failed + in_flight          (in_flight = sum of depths)
    for each stage: entered = left + depth
    0 <= filtered <= consumed
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from microcoder.rates import Rates

STAGES = ("leased", "unscored", "scoring", "scored")


@dataclass
class Counters:
    """Monotonic totals since the run started (they survive snapshot/restore)."""

    issued: int = 0
    consumed: int = 0
    dropped_stale: int = 0
    failed: int = 0
    filtered: int = 0
    """Consumed groups the learner reported it did not train on (dynamic filtering: all rewards
    equal); they stay in `consumed`. Admission control counts consumed - filtered."""
    filtered_ignored: int = 0
    """Filter reports for ids not delivered recently or already reported (retries, typos)."""
    failed_by_reason: Counter = field(default_factory=Counter)
    """failed split by reason: lease_released, lease_expired, or the reason an actor gave."""
    entered: Counter = field(default_factory=Counter)
    """Slots that entered each stage."""
    left: Counter = field(default_factory=Counter)
    """Slots that left each stage."""
    staleness_hist: Counter = field(default_factory=Counter)
    """Consumed groups by staleness (keys are str(staleness))."""
    errors: Counter = field(default_factory=Counter)
    """Bad requests by code: malformed, oversized, unknown_kind, bad_version, bad_field, ..."""
    response_tokens_in: int = 0
    """Response tokens in accepted groups."""
    bytes_in: int = 0
    bytes_out: int = 0
    requests: int = 0

    def rate_totals(self) -> dict[str, int]:
        """The totals of RATE_KEYS, what `counter_rates()` is updated with."""
        return {k: getattr(self, k) for k in RATE_KEYS}

    def to_dict(self) -> dict[str, Any]:
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Counters:
        out = cls()
        for k, v in data.items():
            if hasattr(out, k):
                setattr(out, k, Counter(v) if isinstance(v, dict) else v)
        return out


def invariant_violations(c: Counters, depths: dict[str, int]) -> list[str]:
    """Every way the counters fail to add up (empty list = exact accounting)."""
    out = []
    in_flight = sum(depths.values())
    total = c.consumed + c.dropped_stale + c.failed + in_flight
    if c.issued != total:
        out.append(
            f"issued {c.issued} != consumed {c.consumed} + dropped_stale {c.dropped_stale} "
            f"+ failed {c.failed} + in_flight {in_flight}"
        )
    if not 0 <= c.filtered <= c.consumed:
        out.append(f"filtered {c.filtered} not within 0..consumed {c.consumed}")
    if c.failed != sum(c.failed_by_reason.values()):
        out.append(f"failed {c.failed} != sum of failed_by_reason {dict(c.failed_by_reason)}")
    for stage in STAGES:
        if c.entered[stage] != c.left[stage] + depths.get(stage, 0):
            out.append(
                f"stage {stage}: entered {c.entered[stage]} != left {c.left[stage]} "
                f"+ depth {depths.get(stage, 0)}"
            )
    return out


RATE_KEYS = ("issued", "consumed", "filtered", "dropped_stale", "failed", "response_tokens_in")
RATE_KEYS += ("bytes_in", "bytes_out")
"""The counters whose per-second rates the buffer's stats report (the dashboard charts them)."""


def counter_rates() -> Rates:
    """The buffer's rates of RATE_KEYS: smoothed (EWMA, alpha 0.3) and updated at most once a
    second (microcoder/rates.py; feed it `Counters.rate_totals()`)."""
    return Rates(RATE_KEYS, alpha=0.3, min_interval_s=1.0)

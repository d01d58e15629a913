"""The dashboard's view of a run's metrics: a thread-safe list of flattened records.

The launcher registers `MetricsStore.add` as a MetricsLogger sink; the HTTP server answers
`/api/metrics?since=N` from it. A record is flattened to dotted numeric keys
(`buffer.depths.scored`), which is what the page's charts name (a nested per-step dict such as
`verdict_rates` or `mismatch_by_staleness` becomes one series per key the page finds:
`verdict_rates.AC`, `mismatch_by_staleness.1.kl`); the staleness histogram and the group
pass-rate histogram (`group_pass_hist`) of the newest step travel separately (they are
distributions, not time series), and so does the temperature's story (the calibration table,
every schedule stage and monitor step-up).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from microcoder.launch.monitor.metrics_log import read_metrics

CHARTED_KINDS = ("step", "eval")
"""Record kinds that become chart points; "event" records go to the event list."""
SKIP_SUBTREES = ("buffer.prompt_cursor", "buffer.staleness_hist", "buffer.rates")
"""Nested fields that are not time series (or are too big to send every step)."""
MAX_BATCH = 5000
"""Most records one `/api/metrics` answer carries (the page asks again for the rest)."""


def flatten(record: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a (nested) record as {"a.b.c": value}; booleans become 0/1."""
    out: dict[str, float] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if name in SKIP_SUBTREES:
            continue
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, bool):
            out[name] = 1.0 if value else 0.0
        elif isinstance(value, (int, float)):
            out[name] = float(value)
    return out


def staleness_hist(record: dict[str, Any]) -> dict[str, int]:
    """The buffer's consumed-groups-by-staleness histogram of a step record ({} if absent)."""
    hist = (record.get("buffer") or {}).get("staleness_hist") or {}
    return {str(k): int(v) for k, v in sorted(hist.items(), key=lambda kv: int(kv[0]))}


def group_pass_hist(record: dict[str, Any]) -> list[int] | None:
    """A step record's groups by pass rate (6 counts: bins [0], (0,.25], (.25,.5], (.5,.75],
    (.75,1), [1]); None if it has none (a run from before the verdict metrics, issue 34)."""
    hist = record.get("group_pass_hist")
    if not isinstance(hist, list) or not all(isinstance(v, (int, float)) for v in hist):
        return None
    return [int(v) for v in hist]


class MetricsStore:
    """Every record of the run (raw and flattened), appended by the metrics sink."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.raw: list[dict[str, Any]] = []
        self._flat: list[dict[str, Any]] = []
        self.latest_step: dict[str, Any] = {}
        self.latest_pass_hist: list[int] | None = None

    def add(self, record: dict[str, Any]) -> None:
        """The MetricsLogger sink: keep the record (called on the training thread)."""
        flat = {"kind": record.get("kind", ""), **flatten(record)}
        if flat.get("step_s", 0.0) > 0 and "wait_s" in flat:  # learner waiting for data
            flat["learner_idle_frac"] = flat["wait_s"] / flat["step_s"]
        if record.get("kind") == "event":
            flat["text"] = str(record.get("message") or record.get("event", ""))
        with self._lock:
            self.raw.append(record)
            self._flat.append(flat)
            if record.get("kind") == "step":
                self.latest_step = record
                self.latest_pass_hist = group_pass_hist(record) or self.latest_pass_hist

    def load(self, path: str | Path) -> int:
        """Add the records of an existing metrics.jsonl (a resumed or finished run)."""
        path = Path(path)
        records = read_metrics(path) if path.exists() else []
        for rec in records:
            self.add(rec)
        return len(records)

    def __len__(self) -> int:
        return len(self._flat)

    def since(self, index: int, limit: int = MAX_BATCH) -> dict[str, Any]:
        """The `/api/metrics?since=N` answer: records N.. split by kind, and where to ask next;
        the newest staleness histogram, the group pass-rate histogram of the newest step that has
        one (None before any does) and the temperature's story."""
        with self._lock:
            index = max(0, min(index, len(self._flat)))
            chunk = self._flat[index : index + limit]
            latest = self.latest_step
            pass_hist = self.latest_pass_hist
            total = len(self._flat)
        return {
            "since": index,
            "next": index + len(chunk),
            "total": total,
            "steps": [r for r in chunk if r["kind"] == "step"],
            "evals": [r for r in chunk if r["kind"] == "eval"],
            "events": [r for r in chunk if r["kind"] == "event"],
            "staleness_hist": staleness_hist(latest),
            "group_pass_hist": pass_hist,
            "temperature": self.temperature(),
        }

    def temperature(self) -> dict[str, Any]:
        """The temperature's story: the newest calibration (table [[T, diversity], ...], chosen,
        target, reached_target, calibration_s; None if the run did not calibrate), every change
        (event="temperature": step, cause, before, temperature, message) and the temperature of
        the newest step (None before the first)."""
        with self._lock:
            events = [r for r in self.raw if r.get("kind") == "event"]
            current = self.latest_step.get("temperature")
        calibrations = [r for r in events if r.get("event") == "calibration"]
        keys = ("table", "chosen", "target", "reached_target", "calibration_s", "step")
        changes = ("step", "cause", "before", "temperature", "message")
        return {
            "calibration": {k: calibrations[-1].get(k) for k in keys} if calibrations else None,
            "changes": [
                {k: r.get(k) for k in changes} for r in events if r.get("event") == "temperature"
            ],
            "current": current,
        }

    def events(self, last: int = 20) -> list[dict[str, Any]]:
        """The newest `last` event records (raw)."""
        with self._lock:
            return [r for r in self.raw if r.get("kind") == "event"][-last:]

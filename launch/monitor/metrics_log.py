"""A run's metrics log: one JSON line per record in `metrics.jsonl` (`MetricsLogger`, and
`read_metrics` to read it back), plus any extra sinks registered on the logger.

Every line has `kind` ("step", "eval", "event"), `time` (unix seconds) and, for steps, `step`
and `policy_version`. The file is the record of truth; exporting elsewhere is the sinks' job
(launch/monitor/metrics_export.py: TensorBoard, W&B; launch/monitor/dashboard_store.py: the dashboard), which
launch/monitor/session.py attaches.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Sink = Callable[[dict[str, Any]], None]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class MetricsLogger:
    """Appends records to `run_dir/metrics.jsonl` (line-buffered) and forwards them to sinks.
    Thread-safe: the training loop and a held-out eval beside it (launch/run/eval_beside.py) both
    log; one record is written and sent to every sink before the next."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", buffering=1)
        self.sinks: list[Sink] = []
        self.history: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def log(self, kind: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            record = _clean({"kind": kind, "time": time.time(), **fields})
            self._file.write(json.dumps(record) + "\n")
            self.history.append(record)
            for sink in self.sinks:
                try:
                    sink(record)
                except Exception as err:  # a broken sink must not stop training
                    print(f"metrics: sink {sink!r} failed: {err}")
            return record

    def close(self) -> None:
        self._file.close()


def read_metrics(path: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Records of a metrics.jsonl (optionally only one kind)."""
    out = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            if kind is None or rec.get("kind") == kind:
                out.append(rec)
    return out

"""Waiting on a launched run from a test: poll a condition until it holds, the run exits or the
deadline passes; read the run's metrics.jsonl records of one kind."""

from __future__ import annotations

import json
import time
from pathlib import Path


def wait_for(cond, timeout_s: float, what: str, proc=None):
    """`cond()`'s first truthy value, polled each second; fails naming `what` on the deadline,
    or at once when `proc` (the launched run) exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run exited ({proc.returncode}) while waiting for {what}")
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def records(run_dir: Path, kind: str) -> list[dict]:
    """The run's metrics.jsonl records of `kind` ("step", "event", ...); [] before the file."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == kind]

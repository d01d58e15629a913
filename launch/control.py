"""Commands to a live run through its run directory (no extra ports, works wherever the files do).

`microcoder scale ...` writes `control/req-<id>.json`; the launcher's supervisor thread
(launch/supervisor.py, every ~2 s, whether or not the learner is mid-step) picks requests up,
applies them (launch/training_loop.py `apply_control`) and writes `control/res-<id>.json`, which the
command waits for. Files are written atomically (write + rename), so a reader never sees half a request.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def send_request(
    run_dir: str | Path, action: dict[str, Any], timeout_s: float = 600.0
) -> dict[str, Any]:
    """Ask the live run in `run_dir` to do `action`; wait for and return its result."""
    folder = Path(run_dir) / "control"
    folder.mkdir(parents=True, exist_ok=True)
    rid = uuid.uuid4().hex[:12]
    _write_atomic(folder / f"req-{rid}.json", {**action, "time": time.time()})
    result = folder / f"res-{rid}.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result.exists():
            return json.loads(result.read_text())
        time.sleep(0.2)
    raise TimeoutError(
        f"the run in {run_dir} did not answer within {timeout_s:.0f} s: is it still running? "
        "(its supervisor applies requests every few seconds; `microcoder status` shows its state)"
    )


class ControlInbox:
    """The launcher's side: requests waiting in `run_dir/control`, oldest first."""

    def __init__(self, run_dir: str | Path):
        self.folder = Path(run_dir) / "control"
        self.folder.mkdir(parents=True, exist_ok=True)

    def poll(self) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for path in sorted(self.folder.glob("req-*.json"), key=lambda p: p.stat().st_mtime):
            rid = path.stem[4:]
            try:
                action = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as err:
                action = {"invalid": str(err)}
            path.unlink(missing_ok=True)
            out.append((rid, action))
        return out

    def reply(self, rid: str, result: dict[str, Any]) -> None:
        _write_atomic(self.folder / f"res-{rid}.json", result)

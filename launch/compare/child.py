"""The real RunOne of launch/compare/runner.py: one `microcoder launch` as a child process.

Its stdout and stderr go to RUN_DIR/launch.log; while it runs, its metrics.jsonl is read as it
grows (from where the last read stopped) and each new step is reported; while no step comes for
QUIET_S (its start: a warm start, the vLLM engine, the calibration; or a long evaluation), the
newest line of its log is reported instead, so the compare never sits silent. Interrupting the
compare (Ctrl-C, SIGTERM) sends the child SIGINT, so it checkpoints and shuts its Ray and
engines down as an interrupted launch does, then waits for it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from microcoder.launch.compare.runner import LOG_FILE, Job

POLL_S = 2.0
"""How often a running launch's metrics.jsonl is looked at."""
QUIET_S = 60.0
"""How long a launch may log no step before its log's newest line is reported."""
STOP_WAIT_S = 180.0
"""After SIGINT, how long an interrupted launch may take to checkpoint and exit before SIGKILL."""

_RUNNING: set[subprocess.Popen] = set()
_LOCK = threading.Lock()


class MetricsTail:
    """The step numbers of `step` records appended to a metrics.jsonl since the last call."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

    def new_steps(self) -> list[int]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next call
        self.offset += end
        steps = []
        for line in chunk[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("kind") == "step" and "step" in rec:
                steps.append(int(rec["step"]))
        return steps


LIBRARY_LINE = re.compile(r"^(\[\d{4}-\d\d-\d\d |\(\S+ pid=\d+|(INFO|WARNING|ERROR|DEBUG) \d)")
"""Lines the libraries log into a launch's output (Ray's `[2026-12-02 15:05:23,336 E ...]`, a
Ray worker's `(Generator pid=12)`, vLLM's `INFO 12-02 ...`): passed over for the launch's own."""


def last_line(path: Path, tail_bytes: int = 8192) -> str:
    """The newest non-empty line of a log that the launch itself wrote (else the newest line);
    a progress bar's last redraw (after a carriage return) counts as a line. At most 160
    characters."""
    try:
        with path.open("rb") as f:
            f.seek(max(path.stat().st_size - tail_bytes, 0))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [part.strip() for part in re.split(r"[\r\n]", text) if part.strip()]
    own = [line for line in lines if not LIBRARY_LINE.match(line)]
    return (own or lines or [""])[-1][:160]


def launch_command(job: Job) -> list[str]:
    """The child's command line: this interpreter running the `microcoder` CLI."""
    return [sys.executable, "-m", "microcoder", *job.argv]


def launch_job(
    job: Job,
    env: dict[str, str],
    on_step: Callable[[int], None],
    on_quiet: Callable[[str], None],
) -> int:
    """Run the job's launch to its end; returns its exit status."""
    job.run_dir.mkdir(parents=True, exist_ok=True)
    tail = MetricsTail(job.run_dir / "metrics.jsonl")
    log_path = job.run_dir / LOG_FILE
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            launch_command(job),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,  # our signal handling decides when it stops
        )
        with _LOCK:
            _RUNNING.add(proc)
        try:
            heard = time.monotonic()
            while True:
                try:
                    rc = proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    steps = tail.new_steps()
                    for step in steps:
                        on_step(step)
                    if steps:
                        heard = time.monotonic()
                    elif time.monotonic() - heard >= QUIET_S:
                        on_quiet(last_line(log_path))
                        heard = time.monotonic()
        except BaseException:
            stop(proc)
            raise
        finally:
            with _LOCK:
                _RUNNING.discard(proc)
    for step in tail.new_steps():
        on_step(step)
    return rc


def stop_all() -> None:
    """Interrupt every launch still running (the compare itself was interrupted)."""
    with _LOCK:
        running = list(_RUNNING)
    for proc in running:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in running:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGINT (the launch checkpoints and shuts down), then SIGKILL after STOP_WAIT_S."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

"""The shared live run of tests/live (its fixture is in tests/live/conftest.py): the settings it
is launched with, whose temperature outcome is known by construction (see that conftest), and
`LiveRun`, what a test gets to observe it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from launch_testing.launched import LaunchedProcess
from launch_testing.waiting import wait_for

LOW, HIGH, TARGET, STAGE_T, LATE_T = 0.001, 2.0, 0.8, 0.001, 1.0
"""Calibration candidates, target diversity, the stage at step 2, and the stage the resume adds."""
SCHEDULE = "algorithm.temperature.schedule"
SETTINGS = {
    "max_steps": "100000",
    "learner.batch_size": "4",
    "generator.max_inflight_prompts": "4",
    "generator.max_response_tokens": "32",
    "algorithm.group_size": "4",
    "executor.workers": "1",
    "monitor.dashboard_port": "0",
    "model.warmstart": "false",
    "algorithm.dynamic_filtering": "false",
    "eval.every": "0",
    "monitor.rollouts_every": "2",
    "algorithm.temperature.calibrate": "true",
    "algorithm.temperature.candidates": f"[{LOW}, {HIGH}]",
    "algorithm.temperature.target_diversity": str(TARGET),
    "algorithm.temperature.probe_prompts": "4",
    "algorithm.temperature.monitor_window": "2",
    SCHEDULE: f"[[2, {STAGE_T}]]",
}


def set_args(settings: dict[str, str]) -> list[str]:
    return [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]


def microcoder(*args: str, **kw) -> subprocess.CompletedProcess:
    """A `microcoder` CLI command to its end (stdout and stderr captured)."""
    return subprocess.run(
        [sys.executable, "-m", "microcoder", *args], capture_output=True, text=True, **kw
    )


@dataclass
class LiveRun:
    """The shared run: its launcher process (`proc`), run directory and launcher output."""

    proc: LaunchedProcess
    run_dir: Path
    log: Path

    def records(self, kind: str, **match) -> list[dict]:
        """metrics.jsonl records of `kind` whose fields equal `match`."""
        path = self.run_dir / "metrics.jsonl"
        rows = map(json.loads, path.read_text().splitlines()) if path.exists() else []
        return [
            r for r in rows if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())
        ]

    def steps(self) -> list[dict]:
        return self.records("step")

    def events(self) -> list[str]:
        return [r["event"] for r in self.records("event") if "event" in r]

    def last_step(self) -> dict:
        return self.steps()[-1]

    def wait_steps(self, more: int, what: str, timeout_s: float = 240) -> None:
        """Wait until `more` steps past the current count are logged (fails naming `what`)."""
        n = len(self.steps())
        wait_for(lambda: len(self.steps()) >= n + more, timeout_s, what, self.proc)


def generator_temperatures(step_record: dict) -> list[float]:
    """The sampling temperature each generator replica reported in a step record."""
    return [r["temperature"] for r in step_record["replicas"] if r["name"].startswith("generator")]

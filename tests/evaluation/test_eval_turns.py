"""`microcoder eval --max-turns 2` end to end on the tiny model (real Ray, a vLLM generator, an
executor and the sandbox, in a subprocess that starts its own Ray): every sample is a trajectory
of the config's environment sampled by the training runner (actors/trajectory.py), each turn's
program is judged on all tests, and the report gives pass@1 after each turn next to the
single-turn figure. The environment is tests/support/user_envs.py `TwoTurnEchoProbe` (always two
turns; turn 1 runs a probe program through the sandbox, i.e. the eval's executors found by
their Ray names); `repair` (the default for --max-turns) runs the same path with the
executor pool's sandbox (tests/launch/test_launch_repair.py runs it in a launch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from launch_testing.cpu_actors import CPU_ACTOR_SETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TESTS = Path(__file__).parents[1]
MIXED = TESTS / "fixtures" / "data" / "eval_mixed.jsonl"


def test_eval_max_turns_reports_pass_at_1_after_each_turn(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "microcoder", "eval", "--model", str(tiny_model_dir)]
    cmd += ["--problems", str(MIXED), "--samples", "2", "--max-tokens", "16,24"]
    cmd += ["--max-prompt-tokens", "512", "--max-turns", "2", "--out", str(out), "--quiet"]
    cmd += [*CPU_ACTOR_SETS, "--set", "environment.kind=user_envs:TwoTurnEchoProbe"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS / "support"), *sys.path])}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=560, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "pass@1 after each turn (2 turns at most): turn 1 " in res.stdout
    assert "each turn is capped at the largest --max-tokens (24)" in res.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["max_turns"] == 2 and report["max_tokens"] == 24
    assert [t["turn"] for t in report["by_turn"]] == [1, 2]
    assert all(t["samples"] == 8 * 2 for t in report["by_turn"])
    assert report["pass_at_k"] == report["by_turn"][1]["pass_at_k"]
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    keys = sorted((r["problem_id"], r["sample_index"], r["turn"]) for r in rows)
    assert keys == sorted(
        (p, i, t) for p in {r["problem_id"] for r in rows} for i in (0, 1) for t in (1, 2)
    )
    assert all(r["tokens"] <= 24 for r in rows)  # the cap is per turn
    md = (out / "report.md").read_text()
    assert "## pass@k after each turn (%)" in md and "1 (single turn)" in md

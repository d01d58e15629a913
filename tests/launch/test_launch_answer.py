"""A 2-step launch trains on the `answer` kind (configs/answer-tiny.toml: exact-answer problems
scored by the shipped reward function, sandbox/rewards/answer.py, without the sandbox) with the
random-weight tiny model: the run finishes its steps, every response gets AC or WA from the
reward (none is judged as a program), the reward function's component reaches metrics.jsonl
and no reward error is counted. The held-out fifth is evaluated at the start and at step 2, its
replies scored by the same reward function (issue 34: the `answer` kind's eval)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_testing.batch import batched_launch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SETTINGS = [
    "model.warmstart=false",
    "generator.max_response_tokens=16",
    "generator.enforce_eager=true",  # no torch.compile: the engine starts sooner
    "monitor.dashboard_port=0",
    "learner.batch_size=2",
    "algorithm.group_size=2",
]
CONFIG = str(Path(__file__).parents[2] / "configs" / "answer-tiny.toml")


def launch_args(run_dir: Path, model_dir: Path) -> list[str]:
    args = [a for s in SETTINGS for a in ("--set", s)]
    return [CONFIG, "--run-dir", str(run_dir), "--set", f'model.path="{model_dir}"', *args]


finished_run = batched_launch(__file__, "answer", launch_args)
"""The module's one launch, run beside the other batched modules' (launch_testing.batch)."""


def test_a_two_step_launch_trains_on_answer_problems(finished_run):
    proc, run_dir = finished_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    steps = [r for r in map(json.loads, lines) if r["kind"] == "step"]
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:
        counts = {k: v for k, v in r["verdict_counts"].items() if v}
        assert set(counts) <= {"AC", "WA"}  # scored by the reward, never run as programs
        assert sum(counts.values()) in (2, 4)  # the groups trained on, 2 responses each
        assert set(r["reward_components"]) == {"formatted"}
        assert r["reward_errors"] == 0
    evals = [r for r in map(json.loads, lines) if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 2]
    for r in evals:
        assert r["heldout_problems"] == 7  # eval.holdout_fraction = 0.2 of the 40
        assert 0.0 <= r["heldout_pass_rate"] <= 1.0
        assert 0.0 <= r["heldout_greedy_pass_rate"] <= 1.0
    samples = run_dir / "evals" / "step_2" / "sampled" / "samples.jsonl"
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 7 and {r["verdict"] for r in rows} <= {"AC", "WA"}
    assert all(r["message"].startswith("reward ") for r in rows)  # the reward function's

"""The measure step for real: the tiny model in a vLLM Generator actor and a sandbox Executor
(the eval path, on the session's Ray), 3 synthetic problems x 2 samples; a rerun reuses the rates."""

from __future__ import annotations

import json

import pytest
from launch_testing.cpu_actors import CPU_ACTOR_SETS

from microcoder.data.synthetic.tasks import generate_tasks
from microcoder.launch.cli.main import main

pytestmark = pytest.mark.slow


def test_measure_writes_one_rate_per_problem_and_a_rerun_measures_nothing(
    ray_cluster, tiny_model_dir, tmp_path, capsys
):
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(p.to_json() + "\n" for p in generate_tasks(0, "heldout", 3)))
    rates = tmp_path / "rates.jsonl"
    argv = [
        "data",
        "filter",
        "--model",
        str(tiny_model_dir),
        "--problems",
        str(problems),
        "--samples",
        "2",
        "--max-tokens",
        "16",
        "--max-prompt-tokens",
        "256",
        "--rates",
        str(rates),
        "--out",
        str(tmp_path / "kept.jsonl"),
        "--report",
        str(tmp_path / "report"),
        *CPU_ACTOR_SETS,
    ]
    assert main(argv) == 0
    lines = [json.loads(x) for x in rates.read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == sorted(p.id for p in generate_tasks(0, "heldout", 3))
    assert all(r["samples"] == 2 and 0 <= r["passed"] <= 2 for r in lines)
    assert all(r["model"] == str(tiny_model_dir.resolve()) for r in lines)
    samples = (tmp_path / "rates.jsonl.eval" / "samples.jsonl").read_text().splitlines()
    assert len(samples) == 6
    before = rates.read_bytes()
    capsys.readouterr()
    assert main(argv) == 0
    assert "0 to measure" in capsys.readouterr().err
    assert rates.read_bytes() == before

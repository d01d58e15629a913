"""Evaluation with a model: real Ray, the tiny model in a real vLLM Generator actor, a real
Executor actor and sandbox, on a small mixed fixture (stdin + functional + assert)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_testing.cpu_actors import CPU_ACTOR_SETS

from microcoder.data.formats.loaders import load_problems
from microcoder.evaluation.engine import evaluate
from microcoder.evaluation.settings import EvalSettings
from microcoder.launch.cli.main import main

MIXED = Path(__file__).parents[1] / "fixtures" / "data" / "eval_mixed.jsonl"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def problems():
    return load_problems(MIXED)


def settings(**kw):
    base = dict(
        samples=2,
        ks=[1, 2],
        budgets=[16, 48],
        temperature=1.0,
        top_p=0.95,
        sequences_per_call=4,
        progress_every_s=0.0,
    )
    return EvalSettings(**{**base, **kw})


def judged(ray, executor) -> int:
    return ray.get(executor.eval_stats.remote(), timeout=60)["judged"]


def test_every_sample_is_judged_at_every_budget_and_the_report_is_complete(
    ray_local, generator, executor, renderer, problems, tmp_path
):
    before = judged(ray_local, executor)
    report = evaluate(problems, settings(), [generator], [executor], tmp_path, renderer.text)
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert sorted((r["problem_id"], r["sample_index"], r["max_tokens"]) for r in rows) == sorted(
        (p.id, i, b) for p in problems for i in range(2) for b in (16, 48)
    )
    assert all(r["tokens"] <= r["max_tokens"] and r["finish_reason"] for r in rows)
    assert all(
        r["tokens"] == 16 for r in rows if r["max_tokens"] == 16 and r["finish_reason"] == "length"
    )
    assert report["problems"] == len(problems) and report["samples_per_problem"] == 2
    assert set(report["pass_at_k"]) == {"1", "2"} and report["max_tokens"] == 48
    assert [b["max_tokens"] for b in report["by_budget"]] == [16, 48]
    assert all(0 <= b["truncation_rate"] <= 1 for b in report["by_budget"])
    groups = {(g["platform"], g["difficulty"]) for g in report["by_group"]}
    assert ("leetcode", "all") in groups and ("all", "easy") in groups
    assert judged(ray_local, executor) - before == report["counts"]["judged_programs"]
    no_code = sum(r["code"] is None for r in rows)
    c = report["counts"]
    assert c["judged_programs"] + c["reused_verdicts"] + no_code == len(rows)
    assert (tmp_path / "report.md").read_text().startswith("# Evaluation report")


def test_resume_after_an_interruption_judges_no_sample_twice(
    ray_local, generator, executor, renderer, problems, tmp_path
):
    seen = []

    def stop_midway(state):
        seen.append(state["done"])
        if state["done"] >= 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate(
            problems, settings(), [generator], [executor], tmp_path, renderer.text, stop_midway
        )
    first = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert 0 < len(first) < len(problems) * 2 * 2
    before = judged(ray_local, executor)
    report = evaluate(
        problems, settings(resume=True), [generator], [executor], tmp_path, renderer.text
    )
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    keys = [(r["problem_id"], r["sample_index"], r["max_tokens"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(problems) * 2 * 2
    assert rows[: len(first)] == first
    old_programs = {(r["problem_id"], r["code"]) for r in first}
    new_programs = {(r["problem_id"], r["code"]) for r in rows[len(first) :] if r["code"]}
    assert judged(ray_local, executor) - before == len(new_programs - old_programs)
    assert report["counts"]["resumed_records"] == len(first)


def test_greedy_single_sample_eval_writes_nothing_without_out_dir(
    ray_local, generator, executor, renderer, problems, tmp_path
):
    report = evaluate(
        problems[:3],
        settings(samples=1, ks=[1], temperature=0.0, budgets=[24]),
        [generator],
        [executor],
        None,
        renderer.text,
    )
    assert report["samples_per_problem"] == 1 and report["problems"] == 3
    assert report["counts"]["policy_versions"] == [0]


def test_the_cli_evaluates_the_tiny_model_on_the_mixed_fixture(ray_local, tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    rc = main(
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--problems",
            str(MIXED),
            "--samples",
            "2",
            "--k",
            "1,2,5",
            "--max-tokens",
            "32,64",
            "--max-prompt-tokens",
            "512",
            "--out",
            str(out),
            "--quiet",
            *CPU_ACTOR_SETS,
        ]
    )
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["k"] == [1, 2] and report["dropped_k"] == [5]
    assert sum(b["samples"] for b in report["by_budget"]) == 8 * 2 * 2
    assert report["skipped_prompts"]["count"] == 0
    settings_json = json.loads((out / "settings.json").read_text())
    assert settings_json["model"] == str(Path(tiny_model_dir).resolve())

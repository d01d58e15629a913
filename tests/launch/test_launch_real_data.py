"""A launch on a real-format problem file (every problem kind, two over-long prompts) with the
random-weight tiny model, which fails every problem: the run skips the over-long prompts at load
(listed in skipped_prompts.jsonl, one warning), reports the all-filtered condition with the
measured pass rate, trains unfiltered as configured, finishes its steps, and evaluates its
held-out fraction through the eval path. One launched run is shared by the tests of this module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_testing.batch import batched_launch
from launch_testing.launched import QUICK, assert_finished, tiny_args
from launch_testing.launched import metrics_records as records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the launch runs in the module fixture

DATA = Path(__file__).parents[1] / "fixtures" / "launch" / "mixed.jsonl"
MAX_PROMPT_TOKENS = 600
SETTINGS = [
    *QUICK,
    f'data.source="{DATA}"',
    "max_steps=2",
    "learner.batch_size=2",
    "generator.max_inflight_prompts=4",
    f"generator.max_prompt_tokens={MAX_PROMPT_TOKENS}",
    "algorithm.group_size=2",
    "algorithm.all_filtered_patience=1",
    'algorithm.all_filtered_action="train-unfiltered"',
    "eval.every=1",
    "eval.holdout_fraction=0.25",
    "eval.max_tokens=16",
    "eval.samples=2",
]


finished_run = batched_launch(__file__, "real-data", tiny_args(SETTINGS))
"""The module's one launch, run beside the other batched modules' (launch_testing.batch)."""


def test_the_run_finishes_its_steps(finished_run):
    assert_finished(*finished_run, steps=2)


def test_over_long_prompts_are_listed_and_warned_about_once(finished_run):
    proc, run_dir = finished_run
    rows = [json.loads(x) for x in (run_dir / "skipped_prompts.jsonl").read_text().splitlines()]
    assert sorted(r["problem_id"] for r in rows) == ["too-long-0", "too-long-1"]
    assert all(r["tokens"] > MAX_PROMPT_TOKENS for r in rows)
    warnings = [ln for ln in proc.stdout.splitlines() if "longer than generator.max_prompt" in ln]
    assert len(warnings) == 1 and "skipped_prompts.jsonl" in warnings[0]
    assert "no held-out problem is left" not in proc.stdout  # its held-out set kept prompts


def test_the_all_filtered_condition_is_reported_with_the_pass_rate(finished_run):
    proc, run_dir = finished_run
    (event,) = [e for e in records(run_dir, "event") if e.get("event") == "all_filtered"]
    assert event["pass_rate"] == 0.0
    assert "too hard" in event["message"]
    assert "training on unfiltered groups" in proc.stdout


def test_the_held_out_fraction_is_evaluated_and_never_trained_on(finished_run):
    from microcoder.data.corpus.holdout import is_held_out
    from microcoder.data.formats.loaders import load_problems

    _, run_dir = finished_run
    held = {p.id for p in load_problems(DATA) if is_held_out(p.id, 0.25)}
    assert held  # the fixture has held-out problems at this fraction
    evals = records(run_dir, "eval")
    assert [e["step"] for e in evals] == [0, 1, 2]
    for e in evals:
        assert e["heldout_problems"] == len(held - {"too-long-0", "too-long-1"})
        assert e["heldout_pass_rate"] == 0.0 and e["heldout_greedy_pass_rate"] == 0.0
    report = json.loads((run_dir / "evals" / "step_2" / "sampled" / "report.json").read_text())
    assert report["samples_per_problem"] == 2
    sampled = [
        json.loads(x)
        for x in (run_dir / "evals" / "step_2" / "sampled" / "samples.jsonl")
        .read_text()
        .splitlines()
    ]
    assert {s["problem_id"] for s in sampled} <= held

"""`microcoder bench eval` on a very small workload: the figures the issue asks for, consistent."""

from __future__ import annotations

import argparse

import pytest

from microcoder.bench import eval as bench_eval

pytestmark = pytest.mark.slow


def test_the_bench_reports_the_three_phases_and_their_ratio(ray_local, tiny_model_dir):
    parser = argparse.ArgumentParser()
    bench_eval.add_arguments(parser)
    args = parser.parse_args(
        [
            "--model",
            str(tiny_model_dir),
            "--problems",
            "12",
            "--samples",
            "2",
            "--max-tokens",
            "16",
            "--set",
            "generator.kv_cache_gib=1",
            "--set",
            "generator.enforce_eager=true",
        ]
    )
    r = bench_eval.run(args)
    assert r["samples"] == 24
    for key in ("eval_wall_s", "generate_only_s", "judge_only_s", "samples_per_s"):
        assert r[key] > 0
    assert r["overlap"] == pytest.approx(
        r["eval_wall_s"] / max(r["generate_only_s"], r["judge_only_s"])
    )
    assert r["judge_only_programs"] == r["judged_programs"]
    assert "overlap = eval / max(generate, judge)" in bench_eval.format_table(r)

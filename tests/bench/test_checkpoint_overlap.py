"""`microcoder bench checkpoint-overlap` runs end to end on a small batch and reports both arms
(its figures go to bench/RESULTS.md; no timing is asserted here)."""

from __future__ import annotations

import argparse

from microcoder.bench import checkpoint_overlap
from microcoder.launch.cli.cmd_bench import BENCHES


def test_the_bench_times_both_arms_and_names_the_goal(tiny_model_dir):
    assert BENCHES["checkpoint-overlap"] == "microcoder.bench.checkpoint_overlap"
    parser = argparse.ArgumentParser()
    checkpoint_overlap.add_arguments(parser)
    args = parser.parse_args(["--model", str(tiny_model_dir), "--rounds", "2", "--groups", "1"])
    result = checkpoint_overlap.run(args)
    assert result["rounds"] == 2 and result["plain_step_s"] > 0
    assert result["ratio"] == result["overlapped_step_s"] / result["plain_step_s"]
    assert 0 < result["snapshot_s"] and 0 < result["sync_save_s"]
    assert "ratio (goal <= 1.1)" in checkpoint_overlap.format_table(result)

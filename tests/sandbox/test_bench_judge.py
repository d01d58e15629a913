"""`microcoder bench judge` end to end on tiny workloads (no LiveCodeBench: that needs its venv)."""

from __future__ import annotations

import argparse

from microcoder.bench import judge as bench


def _args(**over) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--skip-lcb", "--workers", "2", "--workloads", "tricky,overhead"])
    for k, v in over.items():
        setattr(args, k, v)
    return args


def test_repeated_bench_reports_medians_and_agrees_with_the_truth():
    result = bench.run(_args(overhead_solutions=16, repeat=2))
    over, tricky = result["workloads"]["overhead"], result["workloads"]["tricky"]
    assert len(over["runs"]) == 2 and over["solutions"] == 16
    assert over["ours_cpu_ms_per_solution"] > 0 and over["false_verdicts"]["ours"] == 0
    assert tricky["false_verdicts"]["ours"] == 0
    table = bench.format_table(result)
    assert "medians of 2 runs" in table and "CPU per solution ours" in table

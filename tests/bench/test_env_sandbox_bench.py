"""`microcoder bench env-sandbox` is registered and its table reads the figures it names (the
run itself starts Ray and executors: it is the bench, recorded in bench/RESULTS.md)."""

from __future__ import annotations

from microcoder.bench import env_sandbox
from microcoder.launch.cli.cmd_bench import BENCHES


def test_the_bench_is_registered_and_its_table_gives_the_ratios():
    assert BENCHES["env-sandbox"] == "microcoder.bench.env_sandbox"
    figures = {
        "calls": 8,
        "threads": 4,
        "workers": 2,
        "executor_threads": 64,
        "local_median_ms": 4.0,
        "executor_median_ms": 6.0,
        "local_batch_s": 0.1,
        "concurrent_s_threads_4": 0.9,
        "concurrent_s_threads_64": 0.45,
        "verdicts_right": True,
    }
    table = env_sandbox.format_table(figures)
    assert "(1.50x)" in table and "(2.00x faster)" in table and "verdicts right: True" in table

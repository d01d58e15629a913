"""`microcoder bench learner --memory` end to end on a small head: both variants run in their own
process, agree, and the chunked one peaks lower; the default size is refused where it cannot fit."""

from __future__ import annotations

import argparse

import pytest

from microcoder.bench import learner, learner_memory


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    learner.add_arguments(parser)
    return parser.parse_args(["--memory", *argv])


@pytest.fixture(scope="module")
def result():
    """~2,000 log-prob rows x a 16,384 vocabulary: 128 MiB per fp32 block unchunked, 2 MiB per
    32-row chunk (the head's own gradient, 4 MiB, is the same in both)."""
    argv = ["--tokens", "2176", "--vocab", "16384", "--hidden", "64", "--layers", "1"]
    return learner.run(_args(*argv, "--chunk", "32"))


@pytest.mark.slow
def test_memory_bench_variants_agree_to_the_tolerance(result):
    assert result["agree"] and result["atol"] == 1e-5
    assert result["max_abs_diff_grad"] <= 1e-5 and result["max_abs_diff_loss"] <= 1e-5


@pytest.mark.slow
def test_memory_bench_chunked_peak_is_below_a_quarter_of_the_unchunked(result):
    assert result["peak_unchunked_mb"] > 4 * 128  # the [tokens, vocab] blocks were measured
    assert result["ratio"] < 0.25, learner.format_table(result)


def test_memory_bench_refuses_a_size_that_cannot_fit():
    with pytest.raises(SystemExit, match="run with --tokens"):
        learner_memory.check_memory(10**9, 151_936)

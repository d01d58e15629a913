"""`microcoder bench generation --workload`: the workload is seeded and capped, and a toy run on
the tiny model reports every figure with the same tokens on both sides."""

from __future__ import annotations

import argparse
import json

import pytest

from microcoder.bench.generation import add_arguments, format_table, run
from microcoder.bench.generation.workload import MemoryClient, response_lengths


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_longtail_lengths_are_seeded_capped_and_long_tailed():
    a = response_lengths("longtail", 400, 512, seed=3)
    assert a == response_lengths("longtail", 400, 512, seed=3)
    assert min(a) >= 4 and max(a) == 512  # the longest hit the cap
    assert sorted(a)[len(a) // 2] < sum(a) / len(a)  # median below mean: a right tail


def test_uniform_lengths_are_all_the_longtail_mean():
    tail = response_lengths("longtail", 50, 256, seed=1)
    flat = response_lengths("uniform", 50, 256, seed=1)
    assert set(flat) == {round(sum(tail) / len(tail))}


def test_an_unknown_workload_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="longtail"):
        response_lengths("bursty", 4, 64)


def test_the_memory_client_serves_each_prompt_once_then_says_done():
    c = MemoryClient(3)
    first, second = c.get_prompts(2), c.get_prompts(2)
    assert [a.group_id for a in first.assignments + second.assignments] == [0, 1, 2]
    assert not first.done and c.get_prompts(2).done


@pytest.mark.slow
def test_a_toy_run_reports_every_figure_and_both_sides_do_the_same_tokens(tiny_model_dir):
    args = _args(
        "--model",
        str(tiny_model_dir),
        "--device",
        "cpu",
        "--workload",
        "longtail",
        "--groups",
        "6",
        "--capacity",
        "2",
        "--group-size",
        "2",
        "--max-tokens",
        "24",
        "--update-every",
        "0.5",
    )
    result = run(args)
    for key in (
        "streaming_tokens_per_s",
        "waves_tokens_per_s",
        "ratio",
        "pause_s_p50",
        "pause_s_p99",
    ):
        assert result[key] > 0, key
    assert set(result["engine_busy_fraction"]) == {"streaming", "waves"}
    assert (
        result["streaming_tokens"]
        == result["waves_tokens"]
        == 2 * sum(response_lengths("longtail", 6, 24))
    )
    assert result["updates"] >= 1
    json.dumps(result)
    assert "ratio streaming/waves" in format_table(result)

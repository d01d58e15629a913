"""`microcoder bench generation`: the summary/table carry the required figures (no vLLM, no Ray).

No real run here: even the smallest one starts two vLLM engines, a learner and Ray (~1 min on a
quiet machine, 5.5 min measured under load 40), over the CI budget for a smoke test. Run it by
hand: `microcoder bench generation --json --prompts 4 --group-size 2 --tokens 8 --repeats 1
--sync-cycles 1`."""

from __future__ import annotations

import argparse
import json

import pytest

from microcoder.bench.generation import FIELDS, add_arguments, format_table, summarize


def _args(**over) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args([f"--{k.replace('_', '-')}={v}" for k, v in over.items()])


def _actor_run(tokens_per_s: float) -> dict:
    return {
        "tokens": 1000,
        "wall_s": 1000 / tokens_per_s,
        "tokens_per_s": tokens_per_s,
        "busy_tokens_per_s": tokens_per_s * 1.02,
        "engine_generate_s": 0.9,
        "busy_s": 0.95,
        "prompt_fetch_s": 0.01,
        "put_s": 0.01,
        "sync_check_s": 0.001,
        "other_s": 0.02,
    }


SYNC = {
    "sync_cycle_s": 0.2,
    "sync_first_cycle_s": 0.3,
    "sync_cycles": 3,
    "sync_bytes": 2e7,
    "sync_parts_s": {
        "gather_s": 0.04,
        "send_s": 0.04,
        "receive_s": 0.04,
        "reload_s": 0.05,
        "first_token_s": 0.02,
    },
    "sync_runs": [],
}


def _result() -> dict:
    bare = [{"tokens": 1000, "wall_s": 1.0, "tokens_per_s": 1000.0} for _ in range(3)]
    actor = [_actor_run(v) for v in (950.0, 980.0, 900.0)]
    return summarize(_args(repeats=3), bare, actor, SYNC, (1, 2, 3), (4, 5, 6), "cpu")


def test_summary_has_the_required_fields_and_is_json():
    result = json.loads(json.dumps(_result()))
    assert all(isinstance(result[f], float) for f in FIELDS)


def test_ratio_is_the_median_of_the_paired_actor_over_bare_rates():
    assert _result()["ratio"] == pytest.approx(0.95)


def test_engine_share_is_the_median_fraction_of_the_actor_wall_in_llm_generate():
    assert _result()["engine_share"] == pytest.approx(0.9 * 950.0 / 1000)


def test_table_names_both_sides_the_ratio_and_the_sync_cycle():
    table = format_table(_result())
    for text in ("bare vLLM", "actor, wall", "0.950", "weight-sync cycle: 0.200 s", "reload"):
        assert text in table


def test_bench_is_registered_with_the_cli():
    from microcoder.launch.cli.cmd_bench import BENCHES

    assert BENCHES["generation"] == "microcoder.bench.generation"

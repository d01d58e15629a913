"""`microcoder bench judge-http` at a small size: its figures add up (the bytes on the wire of a
group that uploads the problem, of one that does not, against protocol 1's computed bodies)."""

from __future__ import annotations

import argparse

from microcoder.bench import judge_http


def _args(**over) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    judge_http.add_arguments(parser)
    return parser.parse_args([f"--{k.replace('_', '-')}={v}" for k, v in over.items()])


def test_the_bench_counts_one_upload_then_only_programs():
    r = judge_http.run(_args(test_mb=0.5, programs=4, workers=1, spread_problems=4))
    assert r["verdicts_right"]
    tests = r["tests_json_bytes"]
    assert tests < r["group1_bytes"] < tests + 4 * 1024  # one upload and 4 small requests
    assert r["group2_bytes"] < 4 * 1024
    assert r["protocol1_bytes_per_group"] > 4 * tests
    assert sum(r["spread_judged"]) == 4 * 4 and min(r["spread_judged"]) > 0
    assert r["spread_se"] == 0
    assert "protocol 1" in judge_http.format_table(r)

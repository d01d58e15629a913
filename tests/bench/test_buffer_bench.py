"""`microcoder bench buffer --json`: one real run on the smallest payload (real server, real
zmq, spawned generator/executor processes) carries the figures the buffer issue asks for, each
consistent with the others, and the table prints them."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from microcoder.bench.buffer import format_table

REQUIRED = ("groups_per_s", "raw_groups_per_s", "ratio", "p50_ms", "p99_ms")


@pytest.fixture(scope="module")
def result() -> dict:
    cmd = [sys.executable, "-m", "microcoder", "bench", "buffer", "--json"]
    cmd += ["--payloads", "G8x512", "--mb", "1", "--latency-samples", "20", "--profile"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_the_json_carries_every_required_figure_as_a_positive_number(result):
    row = result["payloads"]["G8x512"]
    for key in REQUIRED:
        assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])
    assert row["p99_ms"] >= row["p50_ms"] and row["raw_p99_ms"] >= row["raw_p50_ms"]


def test_only_the_requested_payload_runs_in_whole_waves(result):
    assert list(result["payloads"]) == ["G8x512"]
    row = result["payloads"]["G8x512"]
    assert (row["G"], row["tokens"]) == (8, 512)
    assert row["groups"] >= 200 - row["wave"] and row["groups"] % row["wave"] == 0


def test_ratios_are_the_rates_they_name(result):
    row = result["payloads"]["G8x512"]
    assert row["ratio"] == pytest.approx(row["groups_per_s"] / row["raw_groups_per_s"])
    assert row["ratio_codec"] == pytest.approx(row["groups_per_s"] / row["raw_codec_groups_per_s"])
    assert row["ceiling_ratio"] == pytest.approx(
        row["raw_codec_groups_per_s"] / row["raw_groups_per_s"]
    )
    assert result["min_ratio"] == pytest.approx(row["ratio"])


def test_cpu_is_split_over_the_four_processes_of_the_road(result):
    by = result["payloads"]["G8x512"]["cpu_ms_per_group_by_process"]
    assert set(by) == {"generator", "server", "executor", "learner"}
    assert all(v > 0 for v in by.values())
    total = result["payloads"]["G8x512"]["cpu_ms_per_group"]
    assert total == pytest.approx(sum(by.values()))


def test_the_table_prints_the_payload_row_with_its_ratio(result):
    table = format_table(result)
    row = next(line for line in table.splitlines() if line.startswith("G8x512"))
    assert f"{result['payloads']['G8x512']['ratio']:.2f}" in row
    assert "ceiling" in table.splitlines()[0]


def test_the_curve_default_is_measured_beside_the_plain_socket(result):
    row = result["payloads"]["G8x512"]
    assert row["curve_ratio"] == pytest.approx(row["curve_groups_per_s"] / row["groups_per_s"])
    assert row["curve_p99_ms"] >= row["curve_p50_ms"] > 0 and row["curve_cpu_ms_per_group"] > 0
    assert f"{row['curve_ratio']:.2f}" in format_table(result)


def test_the_proxy_baseline_is_measured_and_its_ratio_is_the_rates_it_names(result):
    row = result["payloads"]["G8x512"]
    assert row["proxy_codec_groups_per_s"] > 0 and row["proxy_codec_cpu_ms_per_group"] > 0
    assert row["ratio_vs_proxy"] == pytest.approx(
        row["groups_per_s"] / row["proxy_codec_groups_per_s"]
    )
    table = format_table(result)
    assert "proxy+codec/s" in table and f"{row['ratio_vs_proxy']:.2f}" in table


def test_the_server_profile_splits_its_loop_into_parts_that_add_up(result):
    split = result["payloads"]["G8x512"]["server_split_ms_per_group"]
    parts = ("recv", "decode", "state", "send", "other")
    assert all(split[k] > 0 for k in parts if k != "other") and split["other"] >= 0, split
    assert sum(split[k] for k in parts) == pytest.approx(split["total"])
    assert "server loop (cProfile" in format_table(result)

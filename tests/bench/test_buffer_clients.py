"""`microcoder bench buffer --clients N --json` on a toy size: a few simulated generators and
executors (own DEALER sockets, zmq.asyncio, worker processes) through the real server with
CurveZMQ and admission control on, a learner announcing versions; the figures are there and the
accounting adds up."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from microcoder.bench.buffer import format_table

CALLS = ("lease", "put", "ex_lease", "ex_put")


@pytest.fixture(scope="module")
def result() -> dict:
    cmd = [sys.executable, "-m", "microcoder", "bench", "buffer", "--json", "--clients", "8"]
    cmd += ["--client-procs", "2", "--duration-s", "2", "--ramp-s", "0.5", "--batch", "8"]
    cmd += ["--sample-s", "0.3", "--score-s", "0.02"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)["clients"]


def test_every_call_kind_has_steady_state_latencies(result):
    for kind in CALLS:
        lat = result["latency"][kind]
        assert lat["n"] >= 2, (kind, lat)
        assert 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"] * 1.0001, (kind, lat)


def test_each_worker_measures_its_own_event_loop_lag(result):
    lag = result["latency"]["loop_lag"]  # asyncio may wake a timer a clock tick early: > -1 ms
    assert lag["n"] >= 100 and -1 < lag["p50_ms"] <= lag["p99_ms"] <= lag["max_ms"] * 1.0001
    assert "client loop lag" in format_table({"clients": result})


def test_the_accounting_invariant_holds_and_nothing_is_lost(result):
    assert result["invariant_ok"], result["invariant_violations"]
    assert result["issued"] == (
        result["consumed"]
        + result["dropped_stale"]
        + result["lost"]["failed"]
        + result["in_flight_at_end"]
    )
    assert result["nothing_lost"], result["lost"]
    assert result["counts"]["leased"] == result["issued"] > 0


def test_admission_control_was_live_the_learner_moved_versions(result):
    assert result["versions"] >= 2 and result["consumed"] >= 2 * result["batch"]
    assert result["in_flight"] == 16  # 1.5 x 8 clients rounded up to whole batches


def test_the_server_memory_is_sampled_start_max_end(result):
    rss = result["server_rss_mb"]
    for key in ("start", "max", "end", "steady_first", "steady_last"):
        assert math.isfinite(rss[key]) and rss[key] > 0, (key, rss)
    assert rss["max"] >= rss["end"] and rss["steady_every_5s"][0] == round(rss["steady_first"], 1)


def test_the_table_prints_each_call_and_the_accounting(result):
    table = format_table({"clients": result})
    assert "generator get_prompts" in table and "executor put_scored" in table
    assert "invariant ok" in table and f"{result['latency']['put']['p99_ms']:.2f}" in table


def test_the_server_cpu_over_the_run_is_measured(result):
    assert 0 < result["server_cpu_fraction"] < 2  # of one core; the loop is one thread + zmq's
    assert len(result["client_proc_cpu_fraction"]) == 2 and all(
        0 < x < 2 for x in result["client_proc_cpu_fraction"]
    )
    assert result["server_split_s"] is None  # only with --profile


def test_the_server_times_each_request_it_handles(result):
    ms = result["server_ms"]
    assert ms["handle_wall"]["n"] >= result["latency"]["put"]["n"]  # every call is handled
    assert 0 < ms["handle_cpu"]["p50_ms"] <= ms["handle_wall"]["p99_ms"] * 1.0001
    assert "in the server, per request" in format_table({"clients": result})

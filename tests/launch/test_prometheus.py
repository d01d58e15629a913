"""The Prometheus /metrics page: exposition format, gauges and counters of the newest step."""

from __future__ import annotations

import re
import urllib.request

import pytest
from launch_testing.synthetic_metrics import (
    feed,
    synthetic_eval,
    synthetic_rewards,
    synthetic_sources,
    synthetic_step,
)

from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.monitor.prometheus import metric_name, prometheus_text

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]\w*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def parse(text: str) -> dict[str, float]:
    """{'name{labels}': value}; asserts every line is a HELP/TYPE comment or a valid sample."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a valid exposition line: {line!r}"
        out[line.rsplit(" ", 1)[0]] = float(m.group(4))
    return out


def test_every_line_is_valid_exposition_format():
    text = prometheus_text({"kind": "step", "time": 1.0, **synthetic_step(4)}, synthetic_eval(4))
    assert text.endswith("\n")
    assert parse(text)


def test_each_metric_has_one_help_and_one_type_line():
    text = prometheus_text({"kind": "step", **synthetic_step(4)})
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    helps = [line.split()[2] for line in text.splitlines() if line.startswith("# HELP")]
    assert len(types) == len(set(types)) and sorted(types) == sorted(helps)


def test_step_fields_are_gauges_with_their_values():
    rec = synthetic_step(6)
    got = parse(prometheus_text(rec))
    assert got["microcoder_gen_tokens_per_s"] == rec["gen_tokens_per_s"]
    assert got["microcoder_policy_version"] == 6
    assert "# TYPE microcoder_staleness_mean gauge" in prometheus_text(rec)


def test_the_mismatch_by_staleness_is_labelled_by_staleness():
    by = {"0": {"kl": 1e-4, "ratio_p99": 1.02}, "1": {"kl": 3e-4, "ratio_p99": 1.1}}
    rec = {**synthetic_step(6), "mismatch_kl": 2e-4, "mismatch_by_staleness": by}
    got = parse(prometheus_text(rec))
    assert got["microcoder_mismatch_kl"] == 2e-4
    assert got['microcoder_mismatch_by_staleness_kl{staleness="1"}'] == 3e-4
    assert got['microcoder_mismatch_by_staleness_ratio_p99{staleness="0"}'] == 1.02
    assert not any(k.startswith("microcoder_mismatch_by_staleness_0") for k in got)


def test_buffer_depths_and_counters_are_labelled():
    rec = synthetic_step(6)
    text = prometheus_text(rec)
    got = parse(text)
    assert got['microcoder_buffer_depth{stage="scored"}'] == rec["buffer"]["depths"]["scored"]
    assert got['microcoder_buffer_groups_total{outcome="consumed"}'] == rec["buffer"]["consumed"]
    assert got['microcoder_buffer_consumed_by_staleness_total{staleness="1"}'] == 16
    assert "# TYPE microcoder_buffer_groups_total counter" in text


def test_online_difficulty_counts_are_buffer_counters():
    rec = synthetic_step(6)
    rec["buffer"] |= {"retired": 3, "deferred": 5, "deferred_problems": 2}
    text = prometheus_text(rec)
    got = parse(text)
    assert got["microcoder_buffer_retired_total"] == 3
    assert got["microcoder_buffer_deferred_total"] == 5
    assert "# TYPE microcoder_buffer_retired_total counter" in text
    assert got["microcoder_buffer_deferred_problems"] == 2  # a gauge: deferred now


def test_eval_record_is_exported_under_eval():
    got = parse(prometheus_text(synthetic_step(5), synthetic_eval(5)))
    assert got["microcoder_eval_heldout_pass_rate"] == 0.25


def test_no_step_yet_still_reports_up():
    assert parse(prometheus_text({})) == {"microcoder_up": 1.0}


def test_metric_names_are_sanitised():
    assert metric_name("buffer.depths.scored") == "microcoder_buffer_depths_scored"
    assert metric_name("9lives-x") == "microcoder__9lives_x"


def test_endpoint_serves_the_newest_step(tmp_path):
    logger, store = MetricsLogger(tmp_path), MetricsStore()
    logger.sinks.append(store.add)
    feed(logger, 1, 3)
    server = DashboardServer(store, dict).start()
    try:
        with urllib.request.urlopen(server.url + "metrics", timeout=10) as res:
            assert res.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            got = parse(res.read().decode())
        assert got["microcoder_step"] == 3
    finally:
        server.stop()
        logger.close()


def test_verdicts_and_the_pass_rate_histogram_are_labelled():
    counts = {"AC": 3, "WA": 1, "no_code": 0}
    rec = {
        **synthetic_step(6),
        "verdict_counts": counts,
        "verdict_rates": {k: v / 4 for k, v in counts.items()},
        "group_pass_hist": [1, 0, 2, 0, 0, 1],
    }
    got = parse(prometheus_text(rec))
    assert got['microcoder_verdict_counts{verdict="AC"}'] == 3
    assert got['microcoder_verdict_counts{verdict="no_code"}'] == 0
    assert got['microcoder_verdict_rates{verdict="WA"}'] == 0.25
    assert got['microcoder_group_pass_hist{bin="(25%,50%]"}'] == 2
    assert got['microcoder_group_pass_hist{bin="100%"}'] == 1
    assert not any(k.startswith("microcoder_verdict_counts_") for k in got)


def test_reward_components_are_labelled_and_reward_errors_a_counter():
    rec = {**synthetic_step(6), **synthetic_rewards(6)}
    text = prometheus_text(rec)
    got = parse(text)
    assert got['microcoder_reward_components{component="formatted"}'] == pytest.approx(0.6)
    assert got['microcoder_reward_components{component="length"}'] == 0.5
    assert got["microcoder_reward_errors_total"] == 1
    assert "# TYPE microcoder_reward_errors_total counter" in text
    assert "# TYPE microcoder_reward_components gauge" in text
    assert not any(k.startswith("microcoder_reward_components_") for k in got)
    assert "microcoder_reward_errors" not in got  # only the counter, not a gauge beside it
    # a step without them (no reward function components): neither metric, no empty family
    plain = prometheus_text(synthetic_step(6))
    assert "reward_components" not in plain and "reward_errors" not in plain


def test_per_source_metrics_are_labelled_by_source():
    rec = {**synthetic_step(6), **synthetic_sources(6)}
    text = prometheus_text(rec)
    got = parse(text)
    assert got['microcoder_data_share{source="A"}'] == 0.75
    assert got['microcoder_data_share{source="B-v0.3"}'] == 0.25
    assert got['microcoder_data_pass_rate{source="A"}'] == 0.4
    assert got['microcoder_data_reward{source="B-v0.3"}'] == 0.25
    assert got['microcoder_data_groups{source="A"}'] == 8
    assert "# TYPE microcoder_data_share gauge" in text
    assert not any(k.startswith("microcoder_data_A") for k in got)  # not flattened beside
    assert "microcoder_data_" not in prometheus_text(synthetic_step(6))

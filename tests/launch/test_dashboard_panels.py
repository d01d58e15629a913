"""The dashboard's off-policy mismatch panels (issue 35) and verdict panels (issue 34): the store
and the JSON API on synthetic records, and the page in headless Chromium served from a synthetic
run directory's metrics.jsonl (the way a finished run is shown)."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
from launch_testing.chromium import chart_points, page_dom, series_points
from launch_testing.synthetic_metrics import (
    synthetic_mismatch,
    synthetic_rewards,
    synthetic_sources,
    synthetic_step,
    synthetic_verdicts,
)

from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore, flatten
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.monitor.status_view import build_status

STEPS = 12
NONFINITE_AT = 7


def full_step(step: int) -> dict:
    """A step record with the mismatch, verdict and reward-function fields; step 7 dropped
    non-finite samples."""
    guard = {
        "nonfinite_dropped": 2.0 if step == NONFINITE_AT else 0.0,
        "nonfinite_learner_dropped": 1.0 if step == NONFINITE_AT else 0.0,
    }
    fields = synthetic_mismatch(step) | synthetic_verdicts(step) | synthetic_rewards(step)
    fields |= synthetic_sources(step)
    return synthetic_step(step) | fields | guard


def test_flatten_gives_a_series_per_staleness_bucket_and_verdict():
    flat = flatten(full_step(6))
    assert flat["mismatch_by_staleness.8+.kl"] == pytest.approx(
        synthetic_mismatch(6)["mismatch_by_staleness"]["8+"]["kl"]
    )
    assert flat["verdict_rates.TLE"] == 1 / 16 and flat["verdict_counts.AC"] == 10
    assert not any(k.startswith("group_pass_hist") for k in flat)  # a list: sent on its own


def test_metrics_answer_carries_the_newest_group_pass_histogram(tmp_path):
    store = MetricsStore()
    store.add({"kind": "step", **synthetic_step(1)})  # a run from before the verdict metrics
    assert store.since(0)["group_pass_hist"] is None
    for step in (2, 3):
        store.add({"kind": "step", **full_step(step)})
    assert store.since(0)["group_pass_hist"] == synthetic_verdicts(3)["group_pass_hist"]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A synthetic run directory (metrics.jsonl of STEPS steps) served like a finished run."""
    run_dir = tmp_path_factory.mktemp("run")
    logger = MetricsLogger(run_dir)
    for step in range(1, STEPS + 1):
        logger.log("step", **full_step(step))
    logger.close()
    store = MetricsStore()
    assert store.load(run_dir / "metrics.jsonl") == STEPS
    meta = {"run": "panels", "state": "finished", "source": "files", "max_steps": STEPS}
    server = DashboardServer(store, lambda: build_status(store.latest_step, meta=meta)).start()
    try:
        with urllib.request.urlopen(server.url + "api/metrics?since=0", timeout=10) as res:
            api = json.loads(res.read())
        dom = page_dom(server.url + "?poll=500", budget_ms=3000)
    finally:
        server.stop()
    return api, dom


def test_api_sends_the_mismatch_and_verdict_series(page):
    api, _ = page
    last = api["steps"][-1]
    assert last["mismatch_ratio_p99"] == pytest.approx(
        synthetic_mismatch(STEPS)["mismatch_ratio_p99"]
    )
    assert last["verdict_rates.AC"] == 0.75 and last["response_len_p90"] == 60.0 + 2 * STEPS
    assert api["group_pass_hist"] == synthetic_verdicts(STEPS)["group_pass_hist"]


def test_ratio_quantiles_and_kl_by_staleness_are_drawn_per_step(page):
    _, dom = page
    series = series_points(dom)
    for q in ("p1", "p50", "p99"):
        assert series[("mismatch", f"mismatch_ratio_{q}")] == STEPS
    assert series[("mismatch-kl", "mismatch_kl")] == STEPS
    assert series[("mismatch-kl", "mismatch_by_staleness.0.kl")] == STEPS
    assert series[("mismatch-kl", "mismatch_by_staleness.1.kl")] == STEPS
    assert series[("mismatch-kl", "mismatch_by_staleness.8+.kl")] == STEPS - 4  # from step 5
    assert "staleness 8+" in dom


def test_nonfinite_guard_counter_totals_the_run(page):
    _, dom = page
    assert 'data-nonfinite="3"' in dom and "2 at intake, 1 in the learner" in dom


def test_verdict_rates_and_response_length_percentiles_are_drawn(page):
    _, dom = page
    series = series_points(dom)
    assert series[("verdicts", "verdict_rates.AC")] == series[("verdicts", "verdict_rates.WA")]
    assert series[("verdicts", "verdict_rates.AC")] == STEPS
    assert series[("verdicts", "verdict_rates.TLE")] == STEPS - 2  # from step 3
    for key in ("response_len_p50", "response_len_p90", "response_len_max", "response_len_mean"):
        assert series[("length", key)] == STEPS
    assert 'data-verdict-counts="3"' in dom and 'data-extraction-failed="0"' in dom
    assert "no verdicts recorded" not in dom and "no mismatch recorded" not in dom


def test_group_pass_histogram_has_the_newest_steps_six_bins(page):
    _, dom = page
    assert chart_points(dom)["passhist"] == 6
    bars = [int(n) for n in re.findall(r'data-pass-bin="[^"]+" data-count="(\d+)"', dom)]
    assert bars == synthetic_verdicts(STEPS)["group_pass_hist"]


def test_reward_components_are_drawn_per_step_with_the_reward_errors(page):
    """The reward function's named components, one line each (`length` from step 4), and the
    run's reward errors (the newest step's cumulative count) under the chart."""
    api, dom = page
    assert api["steps"][-1]["reward_components.length"] == 0.5
    series = series_points(dom)
    assert series[("components", "reward_components.formatted")] == STEPS
    assert series[("components", "reward_components.length")] == STEPS - 3
    errors = synthetic_rewards(STEPS)["reward_errors"]
    assert f'data-reward-errors="{errors}"' in dom
    assert "no reward components recorded" not in dom


def test_per_source_shares_are_drawn_with_the_newest_steps_table(page):
    """One line per data source (B-v0.3, a dotted name, from step 3) and, under the chart, the newest step's share,
    reward and pass rate of each."""
    api, dom = page
    assert api["steps"][-1]["data.B-v0.3.share"] == pytest.approx(0.25)
    series = series_points(dom)
    assert series[("sources", "data.A.share")] == STEPS
    assert series[("sources", "data.B-v0.3.share")] == STEPS - 2
    assert 'data-sources="2"' in dom and 'data-source="B-v0.3"' in dom
    assert "no data sources recorded" not in dom

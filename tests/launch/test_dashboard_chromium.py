"""The dashboard page in headless Chromium: served on synthetic metrics that keep arriving, the
charts must hold exactly the points of the records the page received. Screenshot kept as a test
artifact: tests/artifacts/dashboard.png."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch_testing.chromium import body_attrs, chart_points, page_dom, series_points
from launch_testing.synthetic_metrics import CALIBRATION, feed, step_up, synthetic_step

from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.monitor.status_view import build_status

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
REPLICAS = {
    "generator": [
        {
            "name": f"generator-{i}",
            "tokens_per_s": 1200.0 - 40 * i,
            "idle_frac": 0.1,
            "restarts": i,
            "version": 9,
        }
        for i in range(2)
    ],
    "executor": [
        {"name": f"executor-{i}", "tests_per_s": 75.0, "idle_frac": 0.6, "restarts": 0}
        for i in range(2)
    ],
}


STEP_UP = step_up(13)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Serve 20 steps; every /api/metrics request logs one more step (metrics keep arriving)."""
    logger = MetricsLogger(tmp_path_factory.mktemp("run"))
    store = MetricsStore()
    logger.sinks.append(store.add)
    logger.log("event", **CALIBRATION)
    feed(logger, 1, 20, eval_every=5)
    logger.log("event", event="generator-1 died (killed); restarting", step=12)
    logger.log("event", **STEP_UP)
    since = store.since

    def since_and_more(index: int, limit: int = 5000):
        n = sum(1 for r in store.raw if r["kind"] == "step")
        logger.log("step", **synthetic_step(n + 1))
        return since(index, limit)

    store.since = since_and_more
    meta = {"run": "chromium-test", "state": "running", "source": "live", "max_steps": 100}
    server = DashboardServer(
        store,
        lambda: build_status(
            store.latest_step, None, ["step 12: generator-1 died"], REPLICAS, meta
        ),
    ).start()
    try:
        dom = page_dom(
            server.url + "?poll=500", budget_ms=4000, screenshot=ARTIFACTS / "dashboard.png"
        )
    finally:
        server.stop()
        logger.close()
    return dom, store


def served_steps(store: MetricsStore, next_index: int) -> int:
    return sum(1 for r in store.raw[:next_index] if r["kind"] == "step")


def test_page_received_records_from_several_polls(loaded):
    dom, store = loaded
    attrs = body_attrs(dom)
    assert int(attrs["steps"]) > 21  # more than the first answer: later polls brought new steps
    assert int(attrs["steps"]) == served_steps(store, int(attrs["next"]))


def test_every_line_chart_has_one_point_per_received_step(loaded):
    dom, store = loaded
    n = served_steps(store, int(body_attrs(dom)["next"]))
    series = series_points(dom)
    for key in [
        ("tokens", "gen_tokens_per_s"),
        ("tokens", "tokens_per_s"),
        ("tests", "tests_per_s"),
        ("buffer", "buffer.depths.scored"),
        ("staleness", "staleness_mean"),
        ("idle", "generator_idle_frac"),
        ("idle", "learner_idle_frac"),
        ("reward", "reward_mean"),
        ("temperature", "diversity"),
        ("length", "response_len_mean"),
        ("truncation", "truncated_frac"),
        ("truncation", "masked_frac"),
        ("truncation", "looping_frac"),
        ("loss", "loss"),
        ("clip", "clip_frac"),
        ("sync", "sync_s"),
        # issue 49: a memory chart per pool, every actor's series, and the engines' KV cache
        ("mem-generator", "memory.generator.generator-1.rss_bytes"),
        ("mem-executor", "memory.executor.executor-0.rss_bytes"),
        ("mem-learner", "memory.learner.learner-0.device_reserved_bytes"),
        ("mem-buffer", "memory.buffer.buffer.rss_bytes"),
        ("kv-cache", "memory.generator.generator-0.kv_cache_usage"),
        ("kv-cache", "memory.generator.generator-1.kv_cache_peak"),
    ]:
        assert series[key] == n, key


def test_heldout_lines_have_one_point_per_eval_record(loaded):
    dom, store = loaded
    evals = sum(1 for r in store.raw if r["kind"] == "eval")
    assert series_points(dom)[("reward", "heldout_pass_rate")] == evals == 4


def test_staleness_histogram_has_a_bar_per_bucket(loaded):
    dom, _ = loaded
    assert chart_points(dom)["hist"] == 3
    assert dom.count("data-staleness=") == 3


def test_header_pools_and_errors_are_rendered(loaded):
    dom, _ = loaded
    assert "chromium-test" in dom and "generator-1" in dom and "executor-0" in dom
    assert "step 12: generator-1 died" in dom


def test_temperature_card_shows_a_row_per_calibration_candidate_and_the_step_up(loaded):
    dom, _ = loaded
    assert dom.count("data-calibration=") == 3
    assert 'data-chosen="1"' in dom
    assert 'data-temperature-change="monitor"' in dom and "temperature 1 -&gt; 1.4" in dom


def test_screenshot_is_kept_as_an_artifact(loaded):
    shot = ARTIFACTS / "dashboard.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_a_run_without_verdict_or_mismatch_metrics_says_so(loaded):
    """Old runs (no issue 34/35 keys): the new panels say so and draw nothing; no guard counter."""
    dom, _ = loaded
    points = chart_points(dom)
    assert points["verdicts"] == points["passhist"] == points["mismatch"] == 0
    assert points["mismatch-kl"] == points["components"] == 0
    assert dom.count("no verdicts recorded") == 2 and dom.count("no mismatch recorded") == 2
    assert "no reward components recorded" in dom and "data-reward-errors" not in dom
    assert "data-nonfinite" not in dom

"""The dashboard's JSON endpoints against a MetricsLogger fed with synthetic records (no Ray)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from launch_testing import synthetic_metrics
from launch_testing.synthetic_metrics import feed, step_up, synthetic_step

from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore, flatten
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.monitor.status_view import build_status


@pytest.fixture
def served(tmp_path):
    logger = MetricsLogger(tmp_path)
    store = MetricsStore()
    logger.sinks.append(store.add)
    server = DashboardServer(
        store, lambda: build_status(store.latest_step, meta={"run": "r1"})
    ).start()
    yield logger, store, server
    server.stop()
    logger.close()


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as res:
        return res.status, res.headers.get("Content-Type"), res.read()


def get_json(url: str):
    return json.loads(get(url)[2])


def test_flatten_gives_dotted_numeric_leaves_and_skips_non_series():
    flat = flatten(synthetic_step(3))
    assert flat["buffer.depths.scored"] == 3.0
    assert flat["buffer.invariant_ok"] == 1.0
    assert not any(k.startswith(("buffer.prompt_cursor", "buffer.staleness_hist")) for k in flat)


def test_metrics_since_returns_every_record_once_across_polls(served):
    logger, _, server = served
    feed(logger, 1, 4, eval_every=2)
    first = get_json(server.url + "api/metrics?since=0")
    feed(logger, 5, 6, eval_every=0)
    second = get_json(server.url + f"api/metrics?since={first['next']}")
    steps = [r["step"] for r in first["steps"] + second["steps"]]
    assert steps == [1, 2, 3, 4, 5, 6]
    assert [r["heldout_pass_rate"] for r in first["evals"]] == pytest.approx([0.22, 0.24])
    assert second["next"] == second["total"] == 8


def test_metrics_carry_the_newest_staleness_histogram(served):
    logger, _, server = served
    feed(logger, 1, 5, eval_every=0)
    got = get_json(server.url + "api/metrics?since=5")
    assert got["steps"] == []
    assert got["staleness_hist"] == synthetic_step(5)["buffer"]["staleness_hist"]


def test_learner_idle_fraction_is_derived_from_wait_and_step_time(served):
    logger, store, _ = served
    feed(logger, 1, 1, eval_every=0)
    rec = store.since(0)["steps"][0]
    assert rec["learner_idle_frac"] == pytest.approx(rec["wait_s"] / rec["step_s"])


def test_status_endpoint_reports_the_newest_step(served):
    logger, _, server = served
    feed(logger, 1, 7, eval_every=0)
    st = get_json(server.url + "api/status")
    assert (st["run"], st["step"], st["version"]) == ("r1", 7, 7)
    assert st["buffer"]["depths"] == synthetic_step(7)["buffer"]["depths"]


def test_status_errors_do_not_break_the_endpoint(tmp_path):
    def broken():
        raise RuntimeError("pool gone")

    server = DashboardServer(MetricsStore(), broken).start()
    try:
        assert "pool gone" in get_json(server.url + "api/status")["status_error"]
    finally:
        server.stop()


def test_page_and_static_files_are_served_without_external_urls(served):
    _, _, server = served
    page = get(server.url)[2].decode()
    js = get(server.url + "static/dashboard.js")
    assert 'src="/static/dashboard.js"' in page
    assert js[1].startswith("text/javascript")
    for body in (page, js[2].decode(), get(server.url + "static/dashboard.css")[2].decode()):
        assert "http://" not in body.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in body


def test_unknown_paths_and_traversal_are_404(served):
    _, _, server = served
    for path in ("nope", "static/../dashboard_server.py", "static/%2e%2e/cli.py"):
        with pytest.raises(urllib.error.HTTPError) as err:
            get(server.url + path)
        assert err.value.code == 404


def test_bad_since_is_a_400(served):
    _, _, server = served
    with pytest.raises(urllib.error.HTTPError) as err:
        get(server.url + "api/metrics?since=abc")
    assert err.value.code == 400


def test_busy_port_falls_back_to_a_free_one(served):
    _, store, server = served
    port = int(server.url.rsplit(":", 1)[1].strip("/"))
    other = DashboardServer(store, dict, port=port).start()
    try:
        assert other.url != server.url
        assert get(other.url + "healthz")[2] == b"ok\n"
    finally:
        other.stop()


CALIBRATION = {**synthetic_metrics.CALIBRATION, "message": "calibrated temperature 1"}
STEP_UP = step_up(3)


def test_metrics_carry_the_calibration_table_and_every_temperature_change(served):
    logger, _, server = served
    logger.log("event", **CALIBRATION)
    feed(logger, 1, 3, eval_every=0)
    logger.log("event", **STEP_UP)
    got = get_json(server.url + "api/metrics?since=0")["temperature"]
    assert got["calibration"]["table"] == CALIBRATION["table"]
    assert (got["calibration"]["chosen"], got["calibration"]["target"]) == (1.0, 0.3)
    assert [(c["cause"], c["before"], c["temperature"]) for c in got["changes"]] == [
        ("monitor", 1.0, 1.4)
    ]


def test_the_event_list_shows_an_events_message(served):
    logger, store, _ = served
    logger.log("event", **STEP_UP)
    assert store.since(0)["events"][0]["text"] == STEP_UP["message"]


def test_a_run_without_calibration_has_no_calibration_in_the_temperature_view(served):
    logger, store, _ = served
    feed(logger, 1, 2, eval_every=0)
    view = store.since(0)["temperature"]
    assert view["calibration"] is None
    assert view["current"] == synthetic_step(2)["temperature"]

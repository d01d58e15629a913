"""The generators set aside for the eval (eval.generators = N, issue 49) as a pool of their own in
`microcoder status` (live and from files) and on the dashboard: replicas, state, memory per
actor, and the policy version the eval samples at.

Stand-ins for the pools here; the real run with eval.generators = 1 is
tests/launch/test_launch_mixture.py's launch, whose files-status is checked there too."""

from __future__ import annotations

import json
import time
import urllib.request
from types import SimpleNamespace

import pytest
from launch_testing.chromium import chart_points, page_dom
from launch_testing.synthetic_metrics import synthetic_step

from microcoder.launch.config import load_config
from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.monitor.status_sources import status_from_files, status_live
from microcoder.launch.monitor.status_view import build_status, render_status
from microcoder.protocol import ActorMemory

GIB = 2**30


class StandInPool:
    """A launch/run/pools.py Pool's surface that status uses: stats(), memory(), errors.
    Its actors report pool "generator" like a real Generator does (actors/generator.py)."""

    def __init__(self, rows, pool="generator", rss=GIB):
        self.rows, self.errors, self.pool, self.rss = rows, [], pool, rss
        self.replicas = {r["name"]: None for r in rows}

    def stats(self):
        return self.rows

    def memory(self, timeout_s=5.0):
        return [ActorMemory(name, self.pool, rss_bytes=self.rss) for name in self.replicas]


def live_run(tmp_path, generators: int, activity: dict):
    cfg = load_config(None, [f"eval.generators={generators}"] if generators else [])
    run = SimpleNamespace(
        cfg=cfg,
        run_dir=tmp_path,
        start_time=0.0,
        buffer_address="",
        weight_channel_address="",
        generators=StandInPool([{"name": "generator-0", "tokens_per_s": 5.0, "version": 7}]),
        executors=StandInPool([{"name": "executor-0", "tests_per_s": 2.0}], "executor"),
        eval_generators=None,
        eval_activity=activity,
    )
    if generators:
        rows = [
            {
                "name": f"eval-generator-{i}",
                "tokens_per_s": 0.0,
                "version": 4,
                "node_ip": "10.0.0.9",
            }
            for i in range(generators)
        ]
        run.eval_generators = StandInPool(rows, rss=2 * GIB)
    return run


def test_live_status_lists_the_eval_pool_its_state_version_and_memory(tmp_path):
    activity = {
        "state": "evaluating",
        "step": 4,
        "version": 4,
        "replicas": ["eval-generator-0"],
        "since": time.time() - 3,
    }
    run = live_run(tmp_path, 1, activity)
    st = json.loads(json.dumps(status_live(run, MetricsStore())))  # what /api/status sends
    pool = st["pools"]["eval-generator"]
    assert (pool["count"], pool["state"], pool["step"], pool["version"]) == (1, "evaluating", 4, 4)
    (row,) = pool["replicas"]
    assert row["name"] == "eval-generator-0" and row["state"] == "evaluating"
    assert row["version"] == 4 and row["node_ip"] == "10.0.0.9"
    # its actors' memory is its own pool's, not the training generators'
    assert st["memory"]["eval-generator"] == {
        "eval-generator-0": {"rss_bytes": 2 * GIB, "processes": 1, "peak_rss_bytes": 0}
    }
    assert list(st["memory"]["generator"]) == ["generator-0"]
    # the training pools are unchanged by it
    assert [r["name"] for r in st["pools"]["generator"]["replicas"]] == ["generator-0"]
    text = render_status(st)
    assert "eval-gens    1 replica(s)   evaluating step 4 at policy version 4" in text, text
    assert "eval-generator-0  evaluating  restarts 0   v4   on 10.0.0.9" in text, text
    assert "  eval-generator-0 RSS   2.00 GiB" in text, text


def test_between_evals_the_pool_is_idle_and_names_the_last_version(tmp_path):
    activity = {
        "state": "idle",
        "step": 8,
        "version": 8,
        "replicas": ["eval-generator-0", "eval-generator-1"],
        "since": time.time(),
    }
    st = status_live(live_run(tmp_path, 2, activity), MetricsStore())
    pool = st["pools"]["eval-generator"]
    assert (pool["state"], pool["version"], pool["count"]) == ("idle", 8, 2)
    assert [r["state"] for r in pool["replicas"]] == ["idle", "idle"]
    assert "idle; last evaluated step 8 at policy version 8" in render_status(st)


def test_before_the_first_eval_point_the_pool_says_so(tmp_path):
    st = status_live(live_run(tmp_path, 1, {}), MetricsStore())
    pool = st["pools"]["eval-generator"]
    assert (pool["state"], pool["version"]) == ("no eval yet", None)
    assert "eval-gens    1 replica(s)   no eval yet" in render_status(st)


def test_a_run_without_eval_generators_has_no_eval_pool(tmp_path):
    st = status_live(live_run(tmp_path, 0, {}), MetricsStore())
    assert list(st["pools"]) == ["generator", "executor", "learner"]
    assert "eval-gens" not in render_status(st)


def test_a_stopped_runs_eval_pool_comes_from_its_config_and_newest_eval_record(tmp_path):
    (tmp_path / "config.toml").write_text("max_steps = 12\n[eval]\ngenerators = 1\n")
    logger = MetricsLogger(tmp_path)
    for step in (1, 2, 3, 4):
        logger.log("step", **synthetic_step(step))
    logger.log(
        "eval",
        step=4,
        policy_version=4,
        policy_versions_seen=[4],
        eval_generators=["eval-generator-0"],
        heldout_pass_rate=0.25,
    )
    logger.close()
    st = status_from_files(tmp_path)
    pool = st["pools"]["eval-generator"]
    assert (pool["count"], pool["state"], pool["step"], pool["version"]) == (1, "idle", 4, 4)
    assert "idle; last evaluated step 4 at policy version 4" in render_status(st)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The dashboard of a live run with one eval generator evaluating step 6 at version 6; its
    step records carry the eval generator's memory."""
    store = MetricsStore()
    for step in range(1, 7):
        record = synthetic_step(step)
        record["memory"]["eval-generator"] = {
            "eval-generator-0": {"rss_bytes": (2 + 0.1 * step) * GIB, "processes": 2}
        }
        store.add({"kind": "step", "time": time.time(), **record})
    replicas = {
        "eval-generator": [{"name": "eval-generator-0", "tokens_per_s": 0.0, "version": 6}],
    }
    meta = {
        "run": "eval-pool",
        "state": "running",
        "source": "live",
        "eval_generators": 1,
        "eval_activity": {
            "state": "evaluating",
            "step": 6,
            "version": 6,
            "replicas": ["eval-generator-0"],
            "since": time.time(),
        },
    }
    server = DashboardServer(
        store, lambda: build_status(store.latest_step, None, [], replicas, meta)
    ).start()
    try:
        with urllib.request.urlopen(server.url + "api/status", timeout=10) as res:
            api = json.loads(res.read())
        dom = page_dom(server.url + "?poll=500", budget_ms=3000)
    finally:
        server.stop()
    return api, dom


def test_the_dashboard_shows_the_eval_pool_card_and_its_memory_chart(page):
    api, dom = page
    assert api["pools"]["eval-generator"]["version"] == 6
    assert 'data-pool="eval-generator"' in dom and 'data-eval-state="evaluating"' in dom
    assert 'data-eval-version="6"' in dom
    assert "evaluating step 6 at policy version 6" in dom and "eval-generator-0" in dom
    assert chart_points(dom)["mem-eval-generator"] == 6

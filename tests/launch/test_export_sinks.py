"""TensorBoard and W&B sinks, and start_monitoring's wiring on a MetricsLogger (no Ray)."""

from __future__ import annotations

import json
import re
import sys
import types
import urllib.request
from types import SimpleNamespace

import pytest
from launch_testing.synthetic_metrics import feed, synthetic_step

from microcoder.launch.config import load_config
from microcoder.launch.monitor.metrics_export import (
    TensorBoardSink,
    WandbSink,
    require_wandb,
    scalars,
)
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.monitor.session import check_exports, start_monitoring


def test_scalars_use_slash_tags_at_the_record_step():
    step, values = scalars({"kind": "step", "time": 1.0, **synthetic_step(3)})
    assert step == 3 and values["buffer/depths/scored"] == 3.0 and "step" not in values
    step, values = scalars({"kind": "eval", "step": 5, "heldout_pass_rate": 0.4})
    assert (step, values) == (5, {"eval/heldout_pass_rate": 0.4})
    assert scalars({"kind": "event", "event": "x", "step": 1}) is None


def test_tensorboard_event_files_hold_the_logged_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = MetricsLogger(tmp_path)
    sink = TensorBoardSink(tmp_path / "tensorboard")
    logger.sinks.append(sink)
    feed(logger, 1, 4, eval_every=2)
    sink.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    events = acc.Scalars("gen_tokens_per_s")
    assert [e.step for e in events] == [1, 2, 3, 4]
    assert events[2].value == pytest.approx(synthetic_step(3)["gen_tokens_per_s"])
    assert [e.step for e in acc.Scalars("eval/heldout_pass_rate")] == [2, 4]


def test_missing_wandb_fails_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(RuntimeError, match="pip install wandb"):
        require_wandb()
    cfg = load_config(None, ['monitor.wandb_project="p"', "monitor.tensorboard=false"])
    with pytest.raises(RuntimeError, match="pip install wandb"):
        check_exports(cfg)


def fake_wandb(calls: list):
    run = SimpleNamespace(
        log=lambda values, step: calls.append((step, values)), finish=lambda: calls.append("finish")
    )
    mod = types.ModuleType("wandb")
    mod.teardown = lambda: calls.append("teardown")
    mod.init = lambda **kw: calls.append(("init", kw)) or run
    return mod


def test_wandb_sink_logs_steps_and_keeps_its_id_for_resume(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setitem(sys.modules, "wandb", fake_wandb(calls))
    sink = WandbSink("proj", tmp_path, {"max_steps": 3})
    sink({"kind": "step", "step": 1, "loss": 0.5})
    sink({"kind": "event", "event": "x"})
    sink.close()
    run_id = calls[0][1]["id"]
    assert calls[0][1]["project"] == "proj" and re.fullmatch("[0-9a-f]{8}", run_id)
    assert calls[1:] == [(1, {"loss": 0.5}), "finish", "teardown"]
    assert json.loads((tmp_path / "wandb.json").read_text())["id"] == run_id
    WandbSink("proj", tmp_path)  # a resumed launch
    assert calls[-1][1]["id"] == run_id and calls[-1][1]["resume"] == "allow"


def fake_run(tmp_path, **monitor):
    sets = ["monitor.dashboard_port=0"] + [
        f"monitor.{k}={json.dumps(v)}" for k, v in monitor.items()
    ]
    cfg = load_config(None, sets)
    logs: list[str] = []
    return SimpleNamespace(
        cfg=cfg,
        run_dir=tmp_path,
        metrics=MetricsLogger(tmp_path),
        generators=None,
        executors=None,
        start_time=0.0,
        buffer_address="",  # as a Run has them before bring-up publishes them
        weight_channel_address="",
        log=logs.append,
        logs=logs,
    )


def test_start_monitoring_serves_records_logged_before_and_after(tmp_path):
    run = fake_run(tmp_path, tensorboard=True)
    feed(run.metrics, 1, 2, eval_every=0)  # e.g. a resumed run's earlier steps
    handle = start_monitoring(run)
    try:
        feed(run.metrics, 3, 4, eval_every=0)
        with urllib.request.urlopen(handle.url + "api/metrics?since=0", timeout=10) as res:
            steps = [r["step"] for r in json.loads(res.read())["steps"]]
        assert steps == [1, 2, 3, 4]
        assert json.loads((tmp_path / "dashboard.json").read_text())["url"] == handle.url
        assert any(handle.url in line for line in run.logs)
        assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    finally:
        handle.stop()
    assert not (tmp_path / "dashboard.json").exists() and run.metrics.sinks == []


def test_live_status_before_the_pools_exist(tmp_path):
    run = fake_run(tmp_path, tensorboard=False)
    handle = start_monitoring(run)
    try:
        with urllib.request.urlopen(handle.url + "api/status", timeout=10) as res:
            st = json.loads(res.read())
        assert (st["state"], st["source"], st["pools"]["generator"]["count"]) == (
            "starting",
            "live",
            0,
        )
    finally:
        handle.stop()


def test_verdict_metrics_become_one_tag_per_verdict_and_per_pass_rate_bin():
    rec = {
        "kind": "step",
        "step": 2,
        "verdict_counts": {"AC": 3, "unfinished": 1},
        "group_pass_hist": [1, 0, 2, 0, 0, 1],
        "response_len_p90": 40.0,
    }
    step, values = scalars(rec)
    assert step == 2 and values["verdict_counts/AC"] == 3 and values["response_len_p90"] == 40
    assert values["verdict_counts/unfinished"] == 1
    assert values["group_pass_hist/0%"] == 1 and values["group_pass_hist/(25%,50%]"] == 2
    assert values["group_pass_hist/100%"] == 1 and rec["group_pass_hist"] == [1, 0, 2, 0, 0, 1]

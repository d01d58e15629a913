"""`microcoder status`: the status dict, its one-screen rendering, live and finished runs."""

from __future__ import annotations

import json
import os
import time

import tomli_w
from launch_testing.synthetic_metrics import feed, synthetic_step

from microcoder.launch.cli.main import main
from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.monitor.status_sources import status_from_files
from microcoder.launch.monitor.status_view import build_status, render_status
from microcoder.launch.run_dirs import newest_run

REPLICAS = {
    "generator": [
        {
            "name": "generator-0",
            "tokens_per_s": 1234.5,
            "idle_frac": 0.1,
            "restarts": 0,
            "version": 9,
        },
        {
            "name": "generator-1",
            "tokens_per_s": 1000.0,
            "idle_frac": 0.2,
            "restarts": 2,
            "version": 9,
        },
    ],
    "executor": [{"name": "executor-0", "error": "actor unreachable", "restarts": 0}],
}


def make_run(tmp_path, steps: int, max_steps: int, log: str = "") -> MetricsLogger:
    run_dir = tmp_path / "runs" / "r1"
    logger = MetricsLogger(run_dir)
    feed(logger, 1, steps)
    logger.log("event", event="generator-1 died (killed); returned its leases; restarting", step=2)
    logger.close()
    (run_dir / "config.toml").write_text(
        tomli_w.dumps({"max_steps": max_steps, "learner": {"world_size": 2}})
    )
    (run_dir / "launcher.log").write_text(log)
    return logger


def test_status_has_pools_rates_buffer_staleness_idle_and_errors():
    st = build_status(synthetic_step(9), None, ["boom"], REPLICAS, {"world_size": 2})
    assert [r["name"] for r in st["pools"]["generator"]["replicas"]] == [
        "generator-0",
        "generator-1",
    ]
    assert st["pools"]["learner"]["count"] == 2
    assert st["rates"]["gen_tokens_per_s"] == synthetic_step(9)["gen_tokens_per_s"]
    assert st["buffer"]["consumed"] == 72 and st["staleness"]["hist"]["0"] == 36
    assert st["idle"]["executor"] == synthetic_step(9)["executor_idle_frac"]
    assert st["errors"] == ["boom"]


def test_render_shows_every_replica_and_the_error_lines():
    text = render_status(
        build_status(synthetic_step(9), None, ["step 2: boom"], REPLICAS, {"run": "r1"})
    )
    for needle in (
        "generator-0",
        "1234.5 tok/s",
        "restarts 2",
        "executor-0",
        "actor unreachable",
        "step 2: boom",
        "policy version 9",
        "invariant ok",
        "0:36",
    ):
        assert needle in text, needle


def test_render_flags_an_accounting_violation():
    rec = synthetic_step(3)
    rec["buffer"] |= {
        "invariant_ok": False,
        "invariant_violations": ["issued 5 != consumed 4 + ..."],
    }
    text = render_status(build_status(rec))
    assert "invariant VIOLATED" in text and "issued 5 != consumed 4" in text


def test_status_shows_the_buffer_error_counters_on_screen_and_in_json(tmp_path, capsys):
    logger = MetricsLogger(tmp_path / "r1")
    rec = synthetic_step(3)
    rec["buffer"]["errors"] = {"path_refused": 2, "malformed": 5}
    logger.log("step", **rec)
    logger.close()
    assert main(["status", "--run", str(tmp_path / "r1"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["buffer"]["errors"] == {
        "malformed": 5,
        "path_refused": 2,
    }
    assert main(["status", "--run", str(tmp_path / "r1")]) == 0
    assert "refused requests malformed 5  path_refused 2" in capsys.readouterr().out
    assert "refused requests none" in render_status(build_status(synthetic_step(3)))


def test_render_of_a_run_without_steps_does_not_fail():
    text = render_status(build_status({}, meta={"run": "empty", "state": "starting"}))
    assert "step 0" in text and "last errors  none" in text and "None" not in text


def test_finished_run_status_comes_from_its_files(tmp_path):
    make_run(tmp_path, steps=6, max_steps=6, log="[10:00:00] executor-1 could not restart: oom\n")
    st = status_from_files(tmp_path / "runs" / "r1")
    assert (st["state"], st["source"], st["step"], st["max_steps"]) == ("finished", "files", 6, 6)
    assert st["pools"]["generator"]["count"] == 2 and st["pools"]["learner"]["count"] == 2
    assert any("generator-1 died" in e for e in st["errors"])
    assert any("could not restart" in e for e in st["errors"])
    assert st["eval"]["heldout_pass_rate"] == 0.25


def test_stopped_run_status_names_the_resume_checkpoint(tmp_path):
    make_run(tmp_path, steps=4, max_steps=10)
    ckpt = tmp_path / "runs" / "r1" / "checkpoints" / "step_4"
    ckpt.mkdir(parents=True)
    (ckpt / "COMPLETE").write_text("4")
    assert "resume from checkpoint step 4" in status_from_files(tmp_path / "runs" / "r1")["state"]


def test_newest_run_is_the_most_recently_written(tmp_path):
    for i, name in enumerate(("old", "new")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("")
        os.utime(tmp_path / name / "metrics.jsonl", (time.time() - 100 + i * 50,) * 2)
    (tmp_path / "tiny-model").mkdir()  # not a run
    assert newest_run(tmp_path).name == "new"


def test_cli_status_of_a_finished_run(tmp_path, capsys):
    make_run(tmp_path, steps=3, max_steps=3)
    assert main(["status", "--run", str(tmp_path / "runs" / "r1")]) == 0
    out = capsys.readouterr().out
    assert "run r1  [finished, from files]" in out and "step 3/3" in out


def test_cli_status_takes_the_run_directory_as_a_positional_argument_too(tmp_path, capsys):
    make_run(tmp_path, steps=3, max_steps=3)
    assert main(["status", str(tmp_path / "runs" / "r1")]) == 0
    assert "run r1  [finished, from files]" in capsys.readouterr().out
    assert main(["status", str(tmp_path / "runs" / "r1"), "--run", str(tmp_path)]) == 2
    assert "two runs given" in capsys.readouterr().err


def test_cli_status_defaults_to_the_newest_run_under_runs(tmp_path, capsys, monkeypatch):
    make_run(tmp_path, steps=2, max_steps=5)
    monkeypatch.chdir(tmp_path)
    assert main(["status", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["step"] == 2
    # issue 49: a run that does not serve shows its newest step's memory per actor
    assert st["memory"]["buffer"]["buffer"]["rss_bytes"] == 0.3 * 2**30 + 2 * 2**20
    assert st["memory"]["learner"]["learner-0"]["device_peak_bytes"] == 40 * 2**30


def test_cli_status_asks_a_live_run_through_its_dashboard(tmp_path, capsys):
    logger = make_run(tmp_path, steps=2, max_steps=5)
    store = MetricsStore()
    store.load(logger.path)
    meta = {"run": "r1", "state": "running", "source": "live"}
    server = DashboardServer(
        store, lambda: build_status(store.latest_step, None, [], REPLICAS, meta)
    ).start()
    (logger.path.parent / "dashboard.json").write_text(json.dumps({"url": server.url}))
    try:
        assert main(["status", "--run", str(logger.path.parent)]) == 0
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert "[running, from live]" in out and "generator-1" in out


def test_cli_status_falls_back_to_files_when_the_dashboard_is_gone(tmp_path, capsys):
    logger = make_run(tmp_path, steps=2, max_steps=5)
    (logger.path.parent / "dashboard.json").write_text(json.dumps({"url": "http://127.0.0.1:9/"}))
    assert main(["status", "--run", str(logger.path.parent)]) == 0
    assert "from files" in capsys.readouterr().out


def test_cli_status_without_runs_says_how_to_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["status"]) == 2
    assert "--run DIR" in capsys.readouterr().err


class FakePool:
    def __init__(self, rows):
        self.rows, self.errors, self.replicas = rows, [], {r["name"]: None for r in rows}

    def stats(self):
        return self.rows

    def memory(self, timeout_s=5.0):
        from microcoder.protocol import ActorMemory

        pool = next(iter(self.replicas)).split("-")[0]
        return [ActorMemory(name, pool, rss_bytes=3 * 2**30) for name in self.replicas]


def test_live_status_publishes_the_addresses_and_each_replicas_node(tmp_path):
    from types import SimpleNamespace

    from microcoder.launch.config import load_config
    from microcoder.launch.monitor.status_sources import status_live

    run = SimpleNamespace(
        cfg=load_config(None),
        run_dir=tmp_path,
        start_time=0.0,
        buffer_address="tcp://10.0.0.4:5555?curve=/runs/r1/keys",
        weight_channel_address="10.0.0.3",
        generators=FakePool([{"name": "generator-0", "node_ip": "10.0.0.7", "tokens_per_s": 1}]),
        executors=FakePool([{"name": "executor-0", "node_ip": "10.0.0.8", "tests_per_s": 2}]),
    )
    st = json.loads(json.dumps(status_live(run, MetricsStore())))  # what /api/status sends
    assert st["buffer_address"] == "tcp://10.0.0.4:5555?curve=/runs/r1/keys"
    assert st["weight_channel_address"] == "10.0.0.3"
    nodes = {
        r["name"]: r["node_ip"]
        for k in ("generator", "executor")
        for r in st["pools"][k]["replicas"]
    }
    assert nodes == {"generator-0": "10.0.0.7", "executor-0": "10.0.0.8"}
    text = render_status(st)
    assert "on 10.0.0.7" in text and "weight channels 10.0.0.3" in text and "10.0.0.4:5555" in text
    # issue 49: every pool's actors' memory, asked live (no learner or buffer in this stand-in)
    assert st["memory"] == {
        "generator": {"generator-0": {"rss_bytes": 3 * 2**30, "processes": 1, "peak_rss_bytes": 0}},
        "executor": {"executor-0": {"rss_bytes": 3 * 2**30, "processes": 1, "peak_rss_bytes": 0}},
    }
    assert "  generator-0    RSS   3.00 GiB" in text, text

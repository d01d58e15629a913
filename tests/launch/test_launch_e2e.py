"""The real one-command launch on the tiny config: steps, live scaling, SIGKILL of a generator
and of an executor, Ctrl-C with a checkpoint, --resume, and a dead learner stopping the resumed
run with the checkpoint to resume from. One launched run is shared by the
tests of this module (a vLLM engine takes 15-40 s to start here); they run in file order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from launch_testing.launched import run_launch, start_launch
from launch_testing.waiting import wait_for

pytestmark = pytest.mark.slow

SETTINGS = [
    "--set",
    "learner.batch_size=4",
    "--set",
    "generator.max_inflight_prompts=4",
    "--set",
    "generator.max_response_tokens=32",
    "--set",
    "algorithm.group_size=4",
    "--set",
    "executor.workers=1",
    "--set",
    "monitor.dashboard_port=0",
    # The machinery test runs the random-weight model: no warm start, no eval, no filtering.
    "--set",
    "model.warmstart=false",
    "--set",
    "algorithm.dynamic_filtering=false",
    "--set",
    "eval.every=0",
]


def microcoder(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "microcoder", *args], capture_output=True, text=True, **kw
    )


def steps(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == "step"]


def events(run_dir: Path) -> list[str]:
    path = run_dir / "metrics.jsonl"
    recs = map(json.loads, path.read_text().splitlines())
    return [r["event"] for r in recs if r["kind"] == "event" and "event" in r]


@pytest.fixture(scope="module")
def live_run(tiny_model_dir, tmp_path_factory):
    """The launched run; stopped at the module's end, and dies with the test process if that is
    killed first (launch_testing.launched)."""
    run_dir = tmp_path_factory.mktemp("launch") / "run"
    args = [
        "configs/tiny-cpu.toml",
        "--run-dir",
        str(run_dir),
        "--set",
        "max_steps=100000",
        "--set",
        f'model.path="{tiny_model_dir}"',
        *SETTINGS,
    ]
    with start_launch(args, log=run_dir.parent / "launch.log") as proc:
        wait_for(lambda: len(steps(run_dir)) >= 2, 600, "two learner steps", proc)
        yield proc, run_dir


def last_step(run_dir: Path) -> dict:
    return steps(run_dir)[-1]


def test_launch_runs_steps_with_versions_and_rates(live_run):
    proc, run_dir = live_run
    wait_for(lambda: len(steps(run_dir)) >= 4, 300, "four steps", proc)
    recs = steps(run_dir)
    versions = [r["policy_version"] for r in recs]
    assert versions == sorted(versions) and versions[-1] >= 4
    assert (run_dir / "config.toml").exists() and (run_dir / "logs" / "generator-0.log").exists()
    assert any(r["gen_tokens_per_s"] > 0 for r in recs) and any(r["tests_per_s"] > 0 for r in recs)
    assert all(r["buffer"]["invariant_ok"] for r in recs)
    assert max(r["staleness_max"] for r in recs) <= 1  # tiny-cpu.toml: max_staleness = 1


def test_status_of_a_local_run_publishes_every_address_on_loopback(live_run):
    """A local run's Ray node IP is 127.0.0.1 (tests/launch/test_local_ray.py), so the buffer,
    the weight channels and every replica report that node; a Ray on the interface address
    would put 192.x or 10.x here (tests/launch/test_node_addresses.py checks the values follow
    the node's IP)."""
    proc, run_dir = live_run
    res = microcoder("status", "--run", str(run_dir), "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert st["source"] == "live"
    assert st["buffer_address"].startswith("tcp://127.0.0.1:")
    assert st["weight_channel_address"] == "127.0.0.1"
    replicas = st["pools"]["generator"]["replicas"] + st["pools"]["executor"]["replicas"]
    assert replicas and {r.get("node_ip") for r in replicas} == {"127.0.0.1"}


def test_dashboard_of_the_live_run_charts_its_steps(live_run):
    from launch_testing.chromium import body_attrs, chart_points, page_dom

    proc, run_dir = live_run
    url = json.loads((run_dir / "dashboard.json").read_text())["url"]
    artifacts = Path(__file__).resolve().parents[1] / "artifacts"
    artifacts.mkdir(exist_ok=True)
    dom = page_dom(url, budget_ms=6000, screenshot=artifacts / "dashboard-launch.png")
    points = chart_points(dom)
    assert points.get("tokens", 0) > 0, points
    assert int(body_attrs(dom)["steps"]) >= 4
    assert (artifacts / "dashboard-launch.png").stat().st_size > 10_000


def test_scale_generators_up_then_down_keeps_the_accounting(live_run):
    proc, run_dir = live_run
    up = microcoder("scale", "generators", "2", "--run", str(run_dir), timeout=900)
    assert up.returncode == 0, up.stdout + up.stderr
    wait_for(lambda: last_step(run_dir)["generators"] == 2, 600, "a step with two generators", proc)
    n = len(steps(run_dir))
    wait_for(lambda: len(steps(run_dir)) >= n + 2, 300, "more steps with two generators", proc)
    assert {r["name"] for r in last_step(run_dir)["replicas"]} >= {"generator-0", "generator-1"}
    down = microcoder("scale", "generators", "1", "--run", str(run_dir), timeout=900)
    assert down.returncode == 0, down.stdout + down.stderr
    n = len(steps(run_dir))
    wait_for(lambda: len(steps(run_dir)) >= n + 2, 300, "steps after scaling down", proc)
    rec = last_step(run_dir)
    assert rec["generators"] == 1 and rec["buffer"]["invariant_ok"]


@pytest.mark.parametrize("kind", ["generator", "executor"])
def test_sigkill_of_a_replica_is_restarted_and_the_run_goes_on(live_run, kind):
    proc, run_dir = live_run
    victim = next(
        r for r in last_step(run_dir)["replicas"] if r["name"].startswith(kind) and r.get("pid")
    )
    os.kill(victim["pid"], signal.SIGKILL)
    wait_for(
        lambda: any(e == f"{victim['name']} restarted" for e in events(run_dir)),
        600,
        f"{victim['name']} to be restarted",
        proc,
    )
    n = len(steps(run_dir))
    wait_for(lambda: len(steps(run_dir)) >= n + 2, 300, "steps after the restart", proc)
    assert last_step(run_dir)["buffer"]["invariant_ok"]


def test_ctrl_c_checkpoints_and_resume_continues_from_it(live_run):
    proc, run_dir = live_run
    proc.signal(signal.SIGINT)
    assert proc.wait(timeout=300) == 130
    ckpts = sorted((run_dir / "checkpoints").glob("step_*"), key=lambda p: int(p.name[5:]))
    assert ckpts and (ckpts[-1] / "COMPLETE").exists() and (ckpts[-1] / "buffer.snapshot").exists()
    saved = int(ckpts[-1].name[5:])
    before = last_step(run_dir)["buffer"]
    res = run_launch(["--resume", str(run_dir), "--set", f"max_steps={saved + 2}"], timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    resumed = [r for r in steps(run_dir) if r["time"] > proc_end_time(run_dir, saved)]
    assert [r["policy_version"] for r in resumed] == [saved + 1, saved + 2]
    after = resumed[-1]["buffer"]
    assert after["invariant_ok"] and after["consumed"] >= before["consumed"]


def proc_end_time(run_dir: Path, saved: int) -> float:
    return (run_dir / "checkpoints" / f"step_{saved}" / "COMPLETE").stat().st_mtime


def learner_rank_pid(launcher_pid: int) -> int | None:
    """Pid of a learner rank actor among the launcher's descendants (Ray names the process)."""
    import psutil

    for child in psutil.Process(launcher_pid).children(recursive=True):
        try:
            if child.cmdline()[:1] and child.cmdline()[0].startswith("ray::LearnerRank"):
                return child.pid
        except psutil.Error:
            continue
    return None


def test_a_dead_learner_stops_the_run_and_names_the_checkpoint_to_resume(live_run):
    _, run_dir = live_run  # the resume test above left a finished run with checkpoints
    log_path = run_dir.parent / "learner-death.log"
    args = ["--resume", str(run_dir), "--set", "max_steps=100000"]
    with start_launch(args, log=log_path) as proc:
        n = len(steps(run_dir))
        wait_for(lambda: len(steps(run_dir)) > n, 600, "a step of the resumed run", proc)
        pid = wait_for(lambda: learner_rank_pid(proc.pid), 60, "the learner rank's process")
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(timeout=300) == 1
    text = log_path.read_text()
    assert "the run stopped" in text, text[-3000:]
    # ... and says so in metrics.jsonl too (what `microcoder compare` reports beside the exit)
    from microcoder.launch.metrics_log import read_metrics

    said = [r for r in read_metrics(run_dir / "metrics.jsonl", "event") if r["event"] == "stopped"]
    assert said and f"the run stopped: {said[-1]['message']}" in text
    complete = [p for p in (run_dir / "checkpoints").glob("step_*") if (p / "COMPLETE").exists()]
    newest = max(complete, key=lambda p: int(p.name[5:]))
    assert f"resume with: microcoder launch --resume {run_dir}   (from {newest.name})" in text

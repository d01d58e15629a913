"""Two Ray nodes on this one machine, every address on loopback (issue 16): a head on 127.0.0.3
and a second node on 127.0.0.2 advertising {"second": 4}, each `ray start --block` in its own
session and process group under a private temp dir; `microcoder launch --address` runs the tiny
config with the generator and the executor pinned to the second node (`resources = {second =
1}`). One launch is shared by the tests of this module; they run in file order.

Ray 2.60, read in .venv: `ray start --head` turns token auth on unless RAY_AUTH_MODE says
otherwise, and a node without the token cannot join, so both nodes and the driver run with
RAY_AUTH_MODE=disabled. It keeps --node-ip-address values other than 127.0.0.1. Worker
processes get a process group of their own but stay in their node's session, so the nodes are
stopped by killpg on their groups and then checked by session: nothing of theirs is left.
The nodes and the launch start through launch_testing.launched, so they also die with a test
process that is killed before its teardown."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from launch_testing.launched import SMALL_RUN, LaunchedProcess, start_launch
from launch_testing.waiting import records, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
]  # two Ray nodes and a launch in the fixture

REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
HEAD_IP, SECOND_IP = "127.0.0.3", "127.0.0.2"
SETTINGS = [
    "max_steps=100000",
    "learner.batch_size=4",
    *SMALL_RUN,
    "generator.resources={second = 1}",
    "executor.resources={second = 1}",
    "generator.enforce_eager=true",  # no torch.compile: the engine (and its restart) starts sooner
]


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def session_members(sids: set[int]) -> list[int]:
    """Pids of the live processes whose session is one of `sids` (a node's `ray start`, its
    raylet, GCS, agents and workers: workers have groups of their own, not sessions)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) in sids:  # state, ppid, pgrp, session
            pids.append(int(entry.name))
    return pids


def stop_sessions(procs: list[LaunchedProcess], timeout_s: float = 60.0) -> list[int]:
    """SIGTERM the groups of `procs`, then SIGKILL what is left of their sessions; returns the
    pids still alive after that (none, unless something escaped)."""
    sids = {p.pid for p in procs}
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    while session_members(sids) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in session_members(sids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(1.0)
    return session_members(sids)


@pytest.fixture(scope="module")
def two_nodes():
    """(GCS address, env of the test cluster): the two nodes up, stopped and checked after."""
    tmp = tempfile.mkdtemp(prefix="mc2n-", dir="/tmp")  # short: Ray's socket paths live here
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=tmp, RAY_AUTH_MODE="disabled", RAY_DEDUP_LOGS="0")
    port = free_port(HEAD_IP)
    address = f"{HEAD_IP}:{port}"
    common = ["--block", "--disable-usage-stats", "--num-cpus", "4"]
    common += ["--object-store-memory", str(300 * 2**20)]  # small: both nodes share this RAM

    def start(name: str, ip: str, *args: str) -> LaunchedProcess:
        cmd = [RAY, "start", "--node-ip-address", ip, "--temp-dir", f"{tmp}/{name}", *common]
        ports = ["--dashboard-agent-listen-port", str(free_port(ip))]
        return LaunchedProcess([*cmd, *ports, *args], log=Path(tmp) / f"{name}.log", env=env)

    head = start(
        "head",
        HEAD_IP,
        "--head",
        "--port",
        str(port),
        "--include-dashboard",
        "false",
        "--ray-client-server-port",
        str(free_port(HEAD_IP)),
    )
    procs = [head]
    try:
        wait_for(lambda: "Ray runtime started" in read(Path(tmp) / "head.log"), 120, "the head")
        second = start("second", SECOND_IP, "--address", address, "--resources", '{"second": 4}')
        procs.append(second)
        wait_for(lambda: "Ray runtime started" in read(Path(tmp) / "second.log"), 120, "node 2")
        yield address, env, tmp
    finally:
        left = stop_sessions(procs)
        shutil.rmtree(tmp, ignore_errors=True)
        assert left == [], f"processes of the test cluster left behind: {left}"


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


@pytest.fixture(scope="module")
def joined_run(two_nodes, tiny_model_dir, tmp_path_factory):
    """The launched run on the two nodes, its own process group killed at the end. Same machine:
    every path is shared, declared as cluster.shared_dir = the tests' temp root."""
    address, env, _ = two_nodes
    run_dir = tmp_path_factory.mktemp("two-nodes") / "run"
    shared = tmp_path_factory.getbasetemp()
    sets = [*SETTINGS, f'model.path="{tiny_model_dir}"', f'cluster.shared_dir="{shared}"']
    cmd = ["configs/tiny-cpu.toml", "--address", address, "--run-dir", str(run_dir)]
    cmd += [arg for s in sets for arg in ("--set", s)]
    proc = start_launch(cmd, log=run_dir.parent / "launch.log", cwd=REPO, env=env, grace_s=30)
    try:
        wait_for(lambda: len(records(run_dir, "step")) >= 4, 600, "four learner steps", proc)
        yield proc, run_dir
    finally:
        proc.stop()  # SIGTERM to its group, SIGKILL after 30 s
        assert stop_sessions([proc]) == []  # the driver's own session: nothing of it is left


def status(run_dir: Path, env: dict) -> dict:
    res = subprocess.run(
        [sys.executable, "-m", "microcoder", "status", "--run", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def replicas(st: dict, pool: str) -> list[dict]:
    return st["pools"][pool]["replicas"]


def test_the_run_on_two_nodes_trains_four_steps(joined_run):
    proc, run_dir = joined_run
    steps = records(run_dir, "step")
    assert [r["policy_version"] for r in steps[:4]] == [1, 2, 3, 4]
    assert all(r["buffer"]["invariant_ok"] for r in steps)
    log = (run_dir / "launcher.log").read_text()
    assert "custom resources: the pools take second=2; the cluster has second=4" in log


def test_status_publishes_the_node_ips_and_the_pinned_pools_run_on_the_second_node(
    joined_run, two_nodes
):
    proc, run_dir = joined_run
    st = status(run_dir, two_nodes[1])
    assert st["source"] == "live"
    assert st["buffer_address"].startswith(f"tcp://{HEAD_IP}:")
    assert st["weight_channel_address"] == HEAD_IP  # learner rank 0 is not pinned: the head
    pinned = replicas(st, "generator") + replicas(st, "executor")
    assert pinned and {r.get("node_ip") for r in pinned} == {SECOND_IP}


def test_the_weights_cross_the_nodes_the_generator_on_node_2_advances_its_version(joined_run):
    proc, run_dir = joined_run
    n = len(records(run_dir, "step"))
    wait_for(lambda: len(records(run_dir, "step")) >= n + 1, 300, "one more step", proc)
    versions = [
        r["version"]
        for step in records(run_dir, "step")
        for r in step["replicas"]
        if r["name"] == "generator-0" and r.get("version") is not None
    ]
    assert versions and versions[-1] >= 2 and versions[-1] > versions[0]


def test_kill_9_of_the_remote_generator_restarts_it_on_its_node_and_the_run_goes_on(
    joined_run, two_nodes
):
    proc, run_dir = joined_run
    victim = next(r for r in records(run_dir, "step")[-1]["replicas"] if r["name"] == "generator-0")
    os.kill(victim["pid"], signal.SIGKILL)
    wait_for(
        lambda: any(e.get("event") == "generator-0 restarted" for e in records(run_dir, "event")),
        600,
        "generator-0 to be restarted",
        proc,
    )
    n = len(records(run_dir, "step"))
    wait_for(lambda: len(records(run_dir, "step")) >= n + 2, 300, "steps after the restart", proc)
    after = next(r for r in records(run_dir, "step")[-1]["replicas"] if r["name"] == "generator-0")
    assert after["pid"] != victim["pid"]
    gens = replicas(status(run_dir, two_nodes[1]), "generator")
    assert [r.get("node_ip") for r in gens] == [SECOND_IP]

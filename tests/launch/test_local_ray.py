"""A local run starts its own Ray on loopback (launch/run/cluster.py: init_local_ray): it never
attaches to a cluster `ray start` recorded on the machine, and Ray's node IP is 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from microcoder.launch.config import load_config
from microcoder.launch.run import cluster

PROBE = """
import json, ray
from ray._private import services
from microcoder.launch.run.cluster import init_local_ray

joined_by_a_bare_init = services.canonicalize_bootstrap_address(None)
init_local_ray(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)

@ray.remote(num_cpus=0)
def node_ip():
    return ray.util.get_node_ip_address()

print(json.dumps({
    "recorded": joined_by_a_bare_init,
    "gcs": ray.get_runtime_context().gcs_address,
    "driver": ray.util.get_node_ip_address(),
    "actor": ray.get(node_ip.remote()),
    "nodes": [n["NodeManagerAddress"] for n in ray.nodes()],
}))
ray.shutdown()
"""


def fake_ray_init(calls: list):
    def init(**kwargs):
        import ray._private.ray_constants as ray_constants

        calls.append({**kwargs, "cluster_mode": ray_constants.ENABLE_RAY_CLUSTER})

    return init


def test_a_local_run_asks_ray_for_a_new_local_instance_in_single_machine_mode(
    monkeypatch, tmp_path
):
    import ray
    import ray._private.ray_constants as ray_constants

    calls: list = []
    monkeypatch.setattr(ray, "init", fake_ray_init(calls))
    run = SimpleNamespace(cfg=load_config(None), run_dir=tmp_path, address="local", log=print)
    cluster.Run.start_ray(run, 4)
    assert calls and calls[0]["address"] == "local" and "_node_ip_address" not in calls[0]
    assert calls[0]["cluster_mode"] is False  # 127.0.0.1 as the node IP, not the interface's
    assert ray_constants.ENABLE_RAY_CLUSTER is True  # restored once the node is up


def test_a_run_with_an_address_joins_that_cluster(monkeypatch, tmp_path):
    import ray

    calls: list = []
    monkeypatch.setattr(ray, "init", fake_ray_init(calls))
    run = SimpleNamespace(
        cfg=load_config(None), run_dir=tmp_path, address="10.0.0.7:6379", log=print
    )
    cluster.Run.start_ray(run, 4, check_plan=False)  # the plan: tests/launch/test_placement.py
    assert calls[0]["address"] == "10.0.0.7:6379" and calls[0]["cluster_mode"] is True


def test_local_ray_ignores_a_recorded_cluster_and_keeps_every_address_on_loopback():
    """Ray reads the cluster `ray start` recorded from $RAY_TMPDIR/ray/ray_current_cluster: a
    private one here, naming a dead cluster that a bare `ray.init()` would try to join."""
    with tempfile.TemporaryDirectory(prefix="mcr", dir="/tmp") as tmp:  # short socket paths
        (Path(tmp) / "ray").mkdir()
        (Path(tmp) / "ray" / "ray_current_cluster").write_text("127.0.0.9:1")
        env = {"RAY_TMPDIR": tmp, "RAY_AUTH_MODE": "disabled", "PATH": "/usr/bin:/bin"}
        res = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180
        )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["recorded"] == "127.0.0.9:1"  # the fake is what a bare ray.init() would join
    assert out["gcs"].startswith(cluster.LOOPBACK + ":")
    assert out["driver"] == out["actor"] == cluster.LOOPBACK
    assert out["nodes"] == [cluster.LOOPBACK]

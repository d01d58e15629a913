"""No hard-coded address: the buffer and the weight channels bind and publish the IP of the node
that hosts them, as Ray reports it. On one machine 127.0.0.1 would connect as well, so the probe
runs a Ray whose node IP is another loopback address, 127.0.0.5, and compares the values."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

import pytest

from microcoder.buffer.config import BufferConfig

NODE_IP = "127.0.0.5"

PROBE = """
import json, ray
from microcoder.actors.remote import buffer_host_cls
from microcoder.buffer.client import BufferClient
from microcoder.buffer.config import BufferConfig
from microcoder.data.config import DataConfig

ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
         configure_logging=False, _node_ip_address="@NODE_IP@")

@ray.remote(num_cpus=0)
class Rank0:
    def channel(self):
        from microcoder.actors.weights.publisher import WeightPublisher

        pub = WeightPublisher(timeout_s=1.0)
        return ray.util.get_node_ip_address(), pub.open_channel("gen-probe")["host"]

host = buffer_host_cls().remote(BufferConfig(), DataConfig(), 1, [("p0", "prompt")])
address = ray.get(host.get_address.remote())
with BufferClient(address, owner="probe") as client:
    served = client.stats() is not None
node, channel = ray.get(Rank0.remote().channel.remote())
print(json.dumps({"nodes": [n["NodeManagerAddress"] for n in ray.nodes()], "buffer": address,
                  "served": served, "actor_node": node, "channel": channel}))
ray.get(host.shutdown.remote())
ray.shutdown()
""".replace("@NODE_IP@", NODE_IP)


def test_auto_host_is_the_hosting_nodes_ip_and_an_explicit_one_wins():
    assert BufferConfig().host == "auto"
    assert BufferConfig().bind_host("10.1.2.3") == "10.1.2.3"
    assert BufferConfig().bind_host() == "127.0.0.1"  # a server outside Ray: loopback
    assert BufferConfig(host="10.9.9.9").bind_host("10.1.2.3") == "10.9.9.9"


@pytest.mark.slow
def test_buffer_and_weight_channel_publish_the_ip_ray_reports_for_their_node():
    with tempfile.TemporaryDirectory(prefix="mcr", dir="/tmp") as tmp:  # short socket paths
        env = {"RAY_TMPDIR": tmp, "RAY_AUTH_MODE": "disabled", "PATH": "/usr/bin:/bin"}
        res = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300
        )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["nodes"] == [NODE_IP] and out["actor_node"] == NODE_IP
    buffer_host = out["buffer"].removeprefix("tcp://").split(":")[0]
    assert (buffer_host, out["channel"]) == (NODE_IP, NODE_IP) and out["served"]

"""CurveZMQ: keys made by `microcoder keys` let actors in and keep everyone else out."""

from __future__ import annotations

import pytest

from microcoder.buffer.client import BufferClient, BufferTimeout
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.keys import generate_keys
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer
from microcoder.launch.cli import main


@pytest.fixture
def curve_server(tmp_path):
    assert main(["keys", str(tmp_path)]) == 0
    keys = tmp_path / "keys"
    server = BufferServer(BufferConfig(curve=True, keys_dir=str(keys)), DatasetPrompts(["a"]), 1)
    server.start()
    yield server, keys
    server.stop()


def test_client_with_the_run_keys_is_served(curve_server):
    server, keys = curve_server
    with BufferClient(server.address, "gen", timeout_s=5, keys_dir=keys) as client:
        assert len(client.get_prompts(1).assignments) == 1


def test_client_without_keys_gets_nothing_and_injects_nothing(curve_server):
    server, _ = curve_server
    with BufferClient(server.address, "intruder", timeout_s=0.5) as client:
        with pytest.raises(BufferTimeout):
            client.get_prompts(1)
    assert server.state.counters.requests == 0


def test_client_with_other_keys_is_refused(curve_server, tmp_path):
    server, _ = curve_server
    other = generate_keys(tmp_path / "other")
    with BufferClient(server.address, "intruder", timeout_s=0.5, keys_dir=other) as client:
        with pytest.raises(BufferTimeout):
            client.get_prompts(1)
    assert server.state.counters.requests == 0


def test_keys_are_not_overwritten_without_force(tmp_path):
    assert main(["keys", str(tmp_path)]) == 0
    secret = (tmp_path / "keys" / "server.key_secret").read_bytes()
    assert main(["keys", str(tmp_path)]) == 1
    assert (tmp_path / "keys" / "server.key_secret").read_bytes() == secret

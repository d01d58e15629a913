"""CurveZMQ (buffer.curve, the default): the run's keys let actors in and keep everyone else out."""

from __future__ import annotations

import stat

import pytest

from microcoder.buffer.client import BufferClient, BufferTimeout
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.keys import ensure_keys, generate_keys, split_address
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer
from microcoder.launch.cli.main import main


@pytest.fixture
def curve_server(tmp_path):
    assert main(["keys", str(tmp_path)]) == 0
    keys = tmp_path / "keys"
    server = BufferServer(BufferConfig(keys_dir=str(keys)), DatasetPrompts(["a", "b"]), 1)
    server.start()
    yield server, keys
    server.stop()


def untouched(server: BufferServer) -> tuple[dict, dict]:
    """What an intruder must not change: every counter and every queue depth."""
    return server.state.counters.to_dict(), server.state.depths()


def test_the_published_address_names_the_keys_folder_and_a_client_of_it_is_served(curve_server):
    server, keys = curve_server
    assert split_address(server.address) == (server.endpoint, keys.resolve())
    with BufferClient(server.address, "gen", timeout_s=5) as client:
        assert len(client.get_prompts(1).assignments) == 1


def test_client_without_keys_gets_no_reply_and_changes_nothing(curve_server):
    server, _ = curve_server
    before = untouched(server)
    with BufferClient(server.endpoint, "intruder", timeout_s=0.5) as client:
        with pytest.raises(BufferTimeout, match="hold the run's keys"):
            client.get_prompts(1)
    assert untouched(server) == before


def test_client_with_another_runs_keys_gets_no_reply_and_changes_nothing(curve_server, tmp_path):
    server, _ = curve_server
    other = generate_keys(tmp_path / "other")
    before = untouched(server)
    with BufferClient(server.endpoint, "intruder", timeout_s=0.5, keys_dir=other) as client:
        with pytest.raises(BufferTimeout):
            client.announce_version(5)
    assert untouched(server) == before and server.state.version == 0


def test_key_files_are_0600_and_their_folders_0700(tmp_path):
    keys, made = ensure_keys(tmp_path / "run" / "keys")
    assert made
    files = [p for p in keys.rglob("*") if p.is_file()]
    assert len(files) == 4
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}
    assert {stat.S_IMODE(d.stat().st_mode) for d in (keys, keys / "clients")} == {0o700}


def test_existing_keys_are_reused_not_replaced(tmp_path):
    keys, _ = ensure_keys(tmp_path / "keys")
    secret = (keys / "server.key_secret").read_bytes()
    assert ensure_keys(keys) == (keys, False)
    assert (keys / "server.key_secret").read_bytes() == secret


def test_a_server_given_no_keys_uses_throwaway_ones_and_removes_them_at_close():
    server = BufferServer(BufferConfig(), DatasetPrompts(["a"]), 1)
    server.start()
    _, keys = split_address(server.address)
    try:
        assert stat.S_IMODE(keys.stat().st_mode) == 0o700
        with BufferClient(server.address, "gen", timeout_s=5) as client:
            assert client.stats()["issued"] == 0
    finally:
        server.stop()
    assert not keys.exists()


def test_keys_are_not_overwritten_without_force(tmp_path):
    assert main(["keys", str(tmp_path)]) == 0
    secret = (tmp_path / "keys" / "server.key_secret").read_bytes()
    assert main(["keys", str(tmp_path)]) == 1
    assert (tmp_path / "keys" / "server.key_secret").read_bytes() == secret

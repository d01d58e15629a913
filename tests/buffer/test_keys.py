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


class PipeDropsAtEverySend:
    """A DEALER stand-in whose pipe looks writable at the poll and is gone at the send (zmq.Again):
    a refused CurveZMQ handshake dropping the pipe between the two, the race `make test` hit."""

    def __init__(self) -> None:
        self.sends = 0

    def poll(self, timeout_ms: int, flags: int) -> int:
        return flags

    def send_multipart(self, frames, flags: int = 0, copy: bool = True) -> None:
        import zmq

        self.sends += 1
        raise zmq.Again()

    def close(self, linger: int | None = None) -> None:
        pass


def test_a_pipe_dropped_between_the_poll_and_the_send_ends_in_the_unreachable_error():
    """zmq.Again from the send is not the caller's error: the client waits for a pipe again, to
    the request's deadline, and then says what to check (the keys among it)."""
    client = BufferClient("tcp://127.0.0.1:1", "intruder", timeout_s=0.3)
    fake = PipeDropsAtEverySend()
    client._sock = fake
    with pytest.raises(BufferTimeout, match="hold the run's keys"):
        client.get_prompts(1)
    assert fake.sends >= 1
    client.close()

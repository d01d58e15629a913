"""Snapshot and Restore requests may only name files under the server's run directory."""

from __future__ import annotations

import pytest

from microcoder.buffer.client import BufferClient, BufferError
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer


@pytest.fixture
def confined(tmp_path):
    """(server, client, run dir, a folder outside it)."""
    run_dir, outside = tmp_path / "run", tmp_path / "elsewhere"
    run_dir.mkdir()
    outside.mkdir()
    server = BufferServer(BufferConfig(), DatasetPrompts(["a"]), 1, snapshot_root=run_dir)
    server.start()
    with BufferClient(server.address, "launcher", timeout_s=5) as client:
        yield server, client, run_dir, outside
    server.stop()


def test_a_snapshot_inside_the_run_directory_is_written(confined):
    _, client, run_dir, _ = confined
    client.snapshot(run_dir / "checkpoints" / "step_1" / "buffer.snapshot")
    assert (run_dir / "checkpoints" / "step_1" / "buffer.snapshot").is_file()


def test_a_snapshot_outside_the_run_directory_is_refused_counted_and_not_written(confined):
    _, client, run_dir, outside = confined
    with pytest.raises(BufferError, match="only paths under it are allowed"):
        client.snapshot(outside / "x.snapshot")
    assert client.stats()["errors"]["path_refused"] == 1
    assert list(outside.iterdir()) == []


def test_dot_dot_out_of_the_run_directory_is_refused(confined):
    _, client, run_dir, outside = confined
    with pytest.raises(BufferError, match="path_refused"):
        client.snapshot(run_dir / ".." / "elsewhere" / "x.snapshot")
    assert list(outside.iterdir()) == []


def test_a_symlink_out_of_the_run_directory_is_refused(confined):
    _, client, run_dir, outside = confined
    (run_dir / "link").symlink_to(outside)
    with pytest.raises(BufferError, match="path_refused"):
        client.snapshot(run_dir / "link" / "x.snapshot")
    assert list(outside.iterdir()) == []


def test_a_restore_from_outside_the_run_directory_is_refused_and_keeps_the_state(confined):
    server, client, run_dir, outside = confined
    client.get_prompts(1)
    client.snapshot(run_dir / "ok.snapshot")
    (outside / "x.snapshot").write_bytes((run_dir / "ok.snapshot").read_bytes())
    with pytest.raises(BufferError, match="path_refused"):
        client.restore(outside / "x.snapshot")
    stats = client.stats()
    assert stats["errors"]["path_refused"] == 1 and stats["in_flight"] == 1


def test_a_server_without_a_snapshot_root_refuses_every_snapshot(tmp_path):
    server = BufferServer(BufferConfig(), DatasetPrompts(["a"]), 1)
    server.start()
    try:
        with BufferClient(server.address, "launcher", timeout_s=5) as client:
            with pytest.raises(BufferError, match="without a snapshot root"):
                client.snapshot(tmp_path / "x.snapshot")
            assert client.stats()["errors"]["path_refused"] == 1
    finally:
        server.stop()
    assert list(tmp_path.iterdir()) == []

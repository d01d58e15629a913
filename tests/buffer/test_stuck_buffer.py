"""A buffer that stops answering ends every client request with an error naming its address and
the remedy, never a hang: a real ZeroMQ ROUTER socket that receives requests and never replies
stands in for a stuck buffer server."""

from __future__ import annotations

import pytest
import zmq

from microcoder.buffer.client import BufferClient, BufferUnreachable


@pytest.fixture
def silent_buffer():
    """A socket that accepts every request and answers none; yields its address."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    yield f"tcp://127.0.0.1:{port}"
    sock.close(linger=0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "request_of",
    [
        lambda c: c.stats(),
        lambda c: c.announce_version(1),
        lambda c: c.get_prompts(2),
        lambda c: c.get_batch(2, 0),  # no batch limit: still bounded by the request deadline
    ],
    ids=["stats", "announce_version", "get_prompts", "get_batch_unlimited"],
)
def test_a_silent_buffer_ends_the_request_naming_its_address_and_the_remedy(
    silent_buffer, request_of
):
    client = BufferClient(silent_buffer, owner="learner", timeout_s=0.5, long_poll_s=0.2)
    try:
        with pytest.raises(BufferUnreachable) as info:
            request_of(client)
    finally:
        client.close()
    assert f"no reply from the buffer at {silent_buffer}" in str(info.value)
    assert "raise buffer.request_timeout_s" in str(info.value)

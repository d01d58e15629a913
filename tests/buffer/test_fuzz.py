"""Garbage in, error replies out: the server answers every bad frame, counts it, and keeps serving."""

from __future__ import annotations

import random

import msgpack
import pytest
import zmq

from microcoder import protocol as m
from microcoder.buffer.client import BufferClient, BufferError
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.keys import secure_client, split_address
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer
from microcoder.buffer.wire import decode_header, pack


def keyed_dealer(address: str) -> zmq.Socket:
    """A raw DEALER holding the run's keys: garbage from an admitted (buggy) client."""
    endpoint, keys = split_address(address)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    secure_client(sock, keys)
    sock.connect(endpoint)
    return sock


@pytest.fixture
def server():
    s = BufferServer(
        BufferConfig(max_frame_mb=0.05, long_poll_s=0.05), DatasetPrompts(["a", "b"]), 2
    )
    s.start()
    yield s
    s.stop()


def random_value(rng: random.Random, depth: int = 0):
    choices = [
        lambda: rng.randint(-(2**63), 2**64 - 1),
        lambda: rng.random() * 1e6,
        lambda: "".join(rng.choice("abc_\x00é") for _ in range(rng.randint(0, 8))),
        lambda: rng.randbytes(rng.randint(0, 16)),
        lambda: None,
        lambda: rng.random() < 0.5,
    ]
    if depth < 3:
        choices.append(lambda: [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))])
        choices.append(
            lambda: {str(random_value(rng, 3)): random_value(rng, depth + 1) for _ in range(3)}
        )
    return rng.choice(choices)()


def garbage_message(rng: random.Random) -> list[bytes]:
    """One of: random bytes, random msgpack, a plausible header with random fields, a put with
    garbage blobs, truncated msgpack, an empty frame."""
    kind = rng.choice(sorted(m.KINDS))
    header = {"v": m.PROTOCOL_VERSION, "kind": kind, "rid": rng.randint(0, 10**6)}
    header.update(
        {
            rng.choice(["owner", "n", "version", "path", "group_id", "wait_s", "x"]): random_value(
                rng
            )
            for _ in range(rng.randint(0, 4))
        }
    )
    pick = rng.randrange(6)
    if pick == 0:
        return [rng.randbytes(rng.randint(1, 200))]
    if pick == 1:
        return [pack(random_value(rng))]
    if pick == 2:
        header.pop("path", None)  # never let the fuzzer write files
        return [pack(header)]
    if pick == 3:
        header["kind"] = rng.choice(["put_unscored", "put_scored"])
        header["owner"] = "fuzz"
        return [pack(header), *(pack(random_value(rng)) for _ in range(rng.randint(1, 3)))]
    if pick == 4:
        return [pack(header)[: rng.randint(1, 5)]]
    return [b""]


def test_thousands_of_garbage_frames_each_get_one_reply_and_service_continues(server):
    rng = random.Random(1234)
    sock = keyed_dealer(server.address)
    sock.setsockopt(zmq.LINGER, 0)
    sent = replies = errors = 0
    for _ in range(30):
        for _ in range(100):
            sock.send_multipart(garbage_message(rng))
            sent += 1
        for _ in range(100):
            assert sock.poll(5000), "the server stopped answering"
            frames = sock.recv_multipart()
            _, reply = decode_header(frames[0])
            replies += 1
            errors += isinstance(reply, m.Error)
    sock.close()
    assert replies == sent == 3000 and errors > 2500
    with BufferClient(server.address, "gen", timeout_s=5) as client:
        stats = client.stats()
        assert client.get_prompts(1).assignments or stats["in_flight"] > 0
    assert stats["invariant_ok"] and sum(stats["errors"].values()) >= errors


def test_oversized_frame_gets_an_error_reply_naming_the_setting(server):
    with BufferClient(server.address, "gen", timeout_s=5) as client:
        with pytest.raises(BufferError, match="max_frame_mb"):
            client.call(m.PutUnscored("gen"), [b"\x00" * 100_000])
        assert client.stats()["errors"]["oversized"] == 1


def test_wrong_protocol_version_gets_an_error_reply(server):
    sock = keyed_dealer(server.address)
    sock.send(msgpack.packb({"v": 0, "kind": "get_stats", "rid": 5}))
    assert sock.poll(5000)
    rid, reply = decode_header(sock.recv_multipart()[0])
    sock.close(linger=0)
    assert rid == 5 and reply.code == "bad_version"


def test_reply_kinds_sent_as_requests_are_refused(server):
    with BufferClient(server.address, "x", timeout_s=5) as client:
        with pytest.raises(BufferError, match="unknown_kind"):
            client.call(m.Ok("hi"))

"""Pipelined puts: several put requests in flight, replies matched by request id."""

from __future__ import annotations

import threading

import pytest

from microcoder.buffer.client import BufferClient, BufferTimeout
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer


@pytest.fixture
def serve():
    servers = []

    def start(**cfg):
        server = BufferServer(BufferConfig(long_poll_s=0.2, **cfg), DatasetPrompts(["p"] * 40), 40)
        servers.append(server)
        return server.start()

    yield start
    for s in servers:
        s.stop()


def waves_of(gen: BufferClient, make_group, n: int, size: int) -> list[list]:
    prompts = gen.get_prompts(n).assignments
    assert len(prompts) == n
    groups = [make_group(a.group_id, a.problem_id) for a in prompts]
    return [groups[i : i + size] for i in range(0, n, size)]


def test_pipelined_waves_all_arrive_in_order(serve, make_group):
    addr = serve()
    with BufferClient(addr, "gen", timeout_s=5) as gen, BufferClient(addr, "ex", timeout_s=5) as ex:
        waves = waves_of(gen, make_group, 20, 3)
        reply = gen.put_unscored_many(waves, window=4)
        got = ex.get_unscored(20)
    sent = [g.group_id for w in waves for g in w]
    assert reply.accepted == sent and [g.group_id for g in got] == sent


def test_pipelined_waves_refused_as_full_are_resent_until_accepted(serve, make_group):
    addr = serve(high_water_groups=2)
    got = []

    def drain():
        with BufferClient(addr, "ex", timeout_s=5) as ex:
            while len(got) < 12:
                got.extend(g.group_id for g in ex.get_unscored(1, wait_s=1))

    thread = threading.Thread(target=drain)
    thread.start()
    with BufferClient(addr, "gen", timeout_s=10) as gen:
        waves = waves_of(gen, make_group, 12, 4)
        reply = gen.put_unscored_many(waves, window=3)
    thread.join(10)
    assert sorted(reply.accepted) == sorted(got) == sorted(g.group_id for w in waves for g in w)


def test_pipelined_put_to_a_dead_server_times_out(serve, make_group):
    with BufferClient("tcp://127.0.0.1:9", "gen", timeout_s=0.3) as gen:
        with pytest.raises(BufferTimeout):
            gen.put_unscored_many([[make_group(1, "p")], [make_group(2, "p")]], window=2)

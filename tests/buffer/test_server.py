"""The real server over real ZeroMQ: the full road, long polls, leases, snapshot, timeouts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import zmq

from microcoder import protocol as m
from microcoder.buffer.client import BufferClient, BufferError, BufferTimeout
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer
from microcoder.buffer.wire import decode_header, encode


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(problems=8, epochs=0, batch_size=2, **cfg):
        cfg.setdefault("long_poll_s", 0.2)
        server = BufferServer(
            BufferConfig(**cfg),
            DatasetPrompts([f"p{i}" for i in range(problems)], epochs),
            batch_size,
            snapshot_root=tmp_path,
        )
        servers.append(server)
        return server, server.start()

    yield start
    for s in servers:
        s.stop()


def fill(addr, make_group, make_scores, n, version=0):
    """Generator + executor: n prompts through to the scored queue; returns their group ids."""
    with BufferClient(addr, "gen", timeout_s=5) as gen, BufferClient(addr, "ex", timeout_s=5) as ex:
        prompts = gen.get_prompts(n).assignments
        assert len(prompts) == n
        groups = [make_group(a.group_id, a.problem_id, versions=(version,) * 4) for a in prompts]
        assert len(gen.put_unscored(groups).accepted) == n
        got = ex.get_unscored(n)
        assert len(ex.put_scored([make_scores(g) for g in got]).accepted) == n
        return [g.group_id for g in got]


def test_groups_travel_from_prompt_to_learner_intact(serve, make_group, make_scores):
    _, addr = serve(max_staleness=1)
    ids = fill(addr, make_group, make_scores, 4)
    with BufferClient(addr, "learner", timeout_s=5) as learner:
        batch = learner.get_batch(2, version=0, timeout_s=5)
        assert [sg.group.group_id for sg in batch.groups] == ids[:2]
        sent = make_group(ids[0], batch.groups[0].group.problem_id, versions=(0,) * 4)
        assert batch.groups[0].group.responses[0].response_ids.tolist() == (
            sent.responses[0].response_ids.tolist()
        )
        assert batch.groups[0].rewards.tolist() == [1.0] * 4
        stats = learner.stats()
    assert stats["consumed"] == 2 and stats["invariant_ok"] and stats["staleness_hist"] == {"0": 2}


def test_each_consumer_gets_only_the_parts_it_reads(serve, make_group, make_scores):
    _, addr = serve(max_staleness=1)
    with BufferClient(addr, "gen", timeout_s=5) as gen, BufferClient(addr, "ex", timeout_s=5) as ex:
        prompts = gen.get_prompts(2).assignments
        gen.put_unscored([make_group(a.group_id, a.problem_id, versions=(0,) * 4) for a in prompts])
        judged = ex.get_unscored(1)[0]  # a judge reads text
        assert judged.responses[0].text == "print(1)" and judged.responses[0].response_ids is None
        full = ex.get_unscored(1, tokens=True)[0]
        assert full.responses[0].text == "print(1)" and len(full.responses[0].logprobs) == 4
        ex.put_scored([make_scores(judged), make_scores(full)])
    with BufferClient(addr, "learner", timeout_s=5) as learner:
        trained = learner.get_batch(1, version=0, timeout_s=5).groups[0].group  # reads tokens
        assert trained.responses[0].text is None and len(trained.responses[0].response_ids) == 4
        shown = learner.get_batch(1, version=0, timeout_s=5, text=True).groups[0].group
        assert shown.responses[0].text == "print(1)" and shown.prompt == "solve it"


@pytest.mark.parametrize(
    "msg, frames",
    [
        (m.PutUnscored("gen", [b"\x80"]), [b"text"]),  # a Group needs text and tensors frames
        (m.PutUnscored("gen", []), [b"text", b"tensors"]),  # frames without their metas
        (m.PutScored("ex", [b"\x80"]), [b"stray"]),  # scores ride in the header only
        (m.PutScored("ex", [b"\xc1"]), []),  # not msgpack
    ],
)
def test_misframed_puts_are_refused_and_the_server_keeps_serving(serve, msg, frames):
    server, addr = serve()
    with BufferClient(addr, "gen", timeout_s=5) as c:
        with pytest.raises(BufferError) as err:
            c.call(msg, frames)
        assert err.value.code in ("bad_field", "malformed")
        assert len(c.get_prompts(1).assignments) == 1
    assert sum(server.state.counters.errors.values()) == 1


def test_learner_blocks_until_its_batch_is_complete(serve, make_group, make_scores):
    _, addr = serve(max_staleness=1)
    fill(addr, make_group, make_scores, 1)
    result = {}

    def learn():
        with BufferClient(addr, "learner", timeout_s=5) as learner:
            result["batch"] = learner.get_batch(2, version=0, timeout_s=10)

    t = threading.Thread(target=learn)
    t.start()
    time.sleep(0.5)
    assert "batch" not in result
    fill(addr, make_group, make_scores, 1)
    t.join(10)
    assert len(result["batch"].groups) == 2


def test_admission_control_holds_back_prompts_until_the_learner_moves(serve):
    _, addr = serve(max_staleness=0, batch_size=2)
    with BufferClient(addr, "gen", timeout_s=5) as gen:
        assert len(gen.get_prompts(10).assignments) == 2
        assert gen.get_prompts(10).assignments == []
        gen.announce_version(1)
        assert len(gen.get_prompts(10).assignments) == 2


def test_released_prompts_are_issued_again(serve):
    _, addr = serve()
    with BufferClient(addr, "gen", timeout_s=5) as gen, BufferClient(addr, "boss") as boss:
        first = gen.get_prompts(2).assignments
        assert boss.release("gen").prompts == 2
        again = gen.get_prompts(2).assignments
        stats = boss.stats()
    assert [a.problem_id for a in again] == [a.problem_id for a in first]
    assert stats["failed_by_reason"] == {"lease_released": 2} and stats["invariant_ok"]


def test_put_of_a_group_never_issued_is_rejected(serve, make_group):
    _, addr = serve()
    with BufferClient(addr, "gen", timeout_s=5) as gen:
        reply = gen.put_unscored(make_group(999, "p0"))
        assert reply.accepted == [] and "999" in reply.rejected[0]


def test_snapshot_restore_loses_no_accepted_group(serve, make_group, make_scores, tmp_path):
    server, addr = serve(max_staleness=3)
    fill(addr, make_group, make_scores, 3)
    with BufferClient(addr, "gen", timeout_s=5) as gen, BufferClient(addr, "ex") as ex:
        a, b = gen.get_prompts(2).assignments
        gen.put_unscored(
            [make_group(a.group_id, a.problem_id), make_group(b.group_id, b.problem_id)]
        )
        ex.get_unscored(1)  # one group is being scored when the snapshot is taken
        gen.get_prompts(1)  # one prompt is leased
        done = gen.snapshot(tmp_path / "buf.snap")
        before = gen.stats()
    assert done.groups == 5
    restored = BufferServer(
        BufferConfig(max_staleness=3),
        DatasetPrompts([f"p{i}" for i in range(8)]),
        2,
        restore_from=tmp_path / "buf.snap",
    )
    depths = restored.state.depths()
    restored.close()
    assert depths == {"leased": 0, "unscored": 2, "scoring": 0, "scored": 3}
    assert restored.state.counters.issued == before["issued"]
    assert restored.state.violations() == []


def test_restore_of_a_missing_file_is_an_error_reply(serve, tmp_path):
    _, addr = serve()
    with BufferClient(addr, "boss", timeout_s=5) as boss:
        with pytest.raises(BufferError, match="bad_snapshot"):
            boss.restore(tmp_path / "nope.snap")
        assert boss.stats()["errors"]["bad_snapshot"] == 1


SERVER_SCRIPT = """
import sys
from microcoder.buffer.config import BufferConfig
from microcoder.buffer.keys import generate_keys
from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.server import BufferServer
from microcoder.buffer.wire import decode_header, encode
s = BufferServer(BufferConfig(keys_dir=str(generate_keys(sys.argv[1]))), DatasetPrompts(["a"]), 1)
print(s.address, flush=True)
s.serve_forever()
"""


def test_client_times_out_cleanly_when_the_server_is_killed(tmp_path):
    proc = subprocess.Popen(  # keys in tmp_path: a killed server cannot remove throwaway ones
        [sys.executable, "-c", SERVER_SCRIPT, str(tmp_path / "keys")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        addr = proc.stdout.readline().strip()
        client = BufferClient(addr, "learner", timeout_s=1.0)
        assert client.stats()["issued"] == 0
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        start = time.monotonic()
        with pytest.raises(BufferTimeout, match="is the buffer server running"):
            client.stats()
        assert time.monotonic() - start < 5
        client.close()
    finally:
        proc.kill()
        proc.wait()


def test_reply_with_another_request_id_is_never_returned():
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")

    def fake_server():  # answers with a stale reply (wrong rid) first, then the right one
        identity, header = router.recv_multipart()
        rid, _ = decode_header(header)
        router.send_multipart([identity, *encode(m.Stats({"issued": -1}), rid - 1)])
        router.send_multipart([identity, *encode(m.Stats({"issued": 7}), rid)])

    t = threading.Thread(target=fake_server)
    t.start()
    with BufferClient(f"tcp://127.0.0.1:{port}", "learner", timeout_s=5) as client:
        assert client.stats() == {"issued": 7}
    t.join(5)
    router.close(linger=0)


def test_the_first_handed_out_prompts_are_logged_once_with_their_time(serve, caplog):
    """`microcoder bench data` reads this line for its seconds to the first prompt."""
    _, addr = serve()
    with caplog.at_level("WARNING", logger="microcoder.buffer"):
        with BufferClient(addr, "gen", timeout_s=5) as gen:
            before = time.time()
            assert len(gen.get_prompts(2).assignments) == 2
            assert len(gen.get_prompts(2).assignments) == 2
    lines = [r.getMessage() for r in caplog.records if "first prompts" in r.getMessage()]
    assert len(lines) == 1 and "2 to 'gen'" in lines[0]
    when = float(lines[0].rsplit("unix time ", 1)[1].rstrip(")"))
    assert before - 1 <= when <= time.time() + 1

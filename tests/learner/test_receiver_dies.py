"""A generator process that dies during a weight sync (issue 33, "What to build" 2): learner
rank 0 gives up on it within `learner.sync_timeout_s`, naming it, and another generator's sync
running at the same time completes with the right bytes.

Rank 0 is the product's `WeightPublisher` (one channel per generator, real gloo groups); each
generator's worker is a real `WeightReceiver` in its own process (spawned), and the test kills
one of them with SIGKILL as soon as it has told rank 0 it is receiving."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import threading
import time

import pytest
import torch

from microcoder.actors.weights.publisher import WeightPublisher

DEADLINE_S = 5.0


def receive_in_child(name: str, conn) -> None:
    """A generator worker: once imported, take the channel's address (JSON), join the channel,
    receive one round, report its sums as JSON."""
    from microcoder.learner.sync.transport import WeightReceiver

    conn.send("imported")
    host, port = json.loads(conn.recv())
    rx = WeightReceiver(host, port, 1, 2, timeout_s=DEADLINE_S, name=name)
    version, tensors = rx.receive_all()
    conn.send(json.dumps([version, {k: float(v.sum()) for k, v in tensors.items()}]))


def _send(publisher: WeightPublisher, name: str, out: dict) -> None:
    t0 = time.monotonic()
    try:
        out[name] = publisher.send(name)
    except Exception as err:  # the test inspects it
        out[name] = err
    out[f"{name}_s"] = time.monotonic() - t0


@pytest.mark.timeout(180)
def test_a_generator_that_dies_mid_sync_is_given_up_on_in_time_and_the_other_sync_completes():
    from microcoder.learner.sync.transport import KEY_PREFIX

    state = {f"w{i}": torch.full((1 << 20,), float(i)) for i in range(8)}  # 8 x 4 MiB
    publisher = WeightPublisher(DEADLINE_S, host="127.0.0.1")
    publisher.publish(1, state)
    ctx, procs, pipes = mp.get_context("spawn"), {}, {}
    try:
        for name in ("gen-dies", "gen-lives"):
            pipes[name], child = ctx.Pipe()
            procs[name] = ctx.Process(target=receive_in_child, args=(name, child))
            procs[name].start()
        for name, pipe in pipes.items():  # torch imported (slow on a busy machine): then join
            assert pipe.poll(120) and pipe.recv() == "imported"
            spec = publisher.open_channel(name, receivers=1)
            pipe.send(json.dumps([spec["host"], spec["port"]]))
        out: dict = {}
        senders = [
            threading.Thread(target=_send, args=(publisher, n, out), daemon=True) for n in procs
        ]
        for thread in senders:
            thread.start()
        channel = publisher._built("gen-dies")  # joined: its sender exists
        assert channel is not None and channel.sender is not None, channel and channel.error
        deadline = time.monotonic() + 60
        while not channel.sender.store.check([f"{KEY_PREFIX}/ready/1/0"]):
            assert time.monotonic() < deadline, "gen-dies never started receiving"
            time.sleep(0.01)
        os.kill(procs["gen-dies"].pid, signal.SIGKILL)
        for thread in senders:
            thread.join(DEADLINE_S * 4)
        assert pipes["gen-lives"].poll(30)
        version, sums = json.loads(pipes["gen-lives"].recv())
    finally:
        for proc in procs.values():
            proc.kill()
            proc.join(10)
    err = out["gen-dies"]
    assert isinstance(err, Exception), err
    assert "rank 1 (gen-dies)" in str(err) and "learner.sync_timeout_s" in str(err)
    assert out["gen-dies_s"] < DEADLINE_S * 2.5  # in time: its deadlines, not forever
    assert version == 1 and out["gen-lives"]["version"] == 1
    assert sums == {k: float(v.sum()) for k, v in state.items()}
    assert "gen-dies" not in publisher._channels  # forgotten: a restarted one reopens
    print(f"gave up on gen-dies after {out['gen-dies_s']:.2f} s: {str(err)[:160]}")

"""Learner rank 0's weight sends to several generators when one of them fails (issue 33, "What
to build" 2): a receiver that dies before its round, one that dies after a round, a slow one,
and a generator that never confirms its pause. The others' syncs complete in time, rank 0 gives
up on the failing one naming it, and no generator holds the learner's next train for longer
than `PAUSE_HOLD_S`.

Rank 0 is the product's `LearnerRank` (its real `WorkLock` and `send_weights`) with a stand-in
Learner, in this process, no Ray; its `WeightPublisher` is the product's over real gloo
channels, forced onto the device path (`sends_from_device` true: tests/support/
rank0_stand_in.py), so every send takes `WorkLock` as over NCCL, which is where one
generator could hold the others. Receivers are real `WeightReceiver`s: on threads of this
process, or in a spawned process the test kills (SIGKILL)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import threading
import time

import pytest
import torch
from rank0_stand_in import StandInLearner, StandInRank0

from microcoder.actors.learner_rank import LearnerRank
from microcoder.actors.weights.publisher import PAUSE_HOLD_S
from microcoder.learner.sync.transport import WeightReceiver, ready_key

SYNC_S = 6.0  # learner.sync_timeout_s of these tests
STATE = {f"w{i}": torch.full((1 << 18,), float(i)) for i in range(4)}  # 4 x 1 MiB


def rank0() -> StandInRank0:
    rank = StandInRank0(StandInLearner(state=STATE), SYNC_S)  # a train takes no time
    rank.stand_in_setup()
    return rank


def in_thread(fn, *args) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def body() -> None:
        t0 = time.monotonic()
        try:
            out["value"] = fn(*args)
        except Exception as err:  # the test inspects it
            out["error"] = err
        out["s"] = time.monotonic() - t0

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


def joined(rank: LearnerRank, name: str) -> tuple[dict, WeightReceiver]:
    """Open `name`'s channel and join it with a receiver on this process."""
    spec = rank.open_weight_channel(name)
    rx = WeightReceiver(spec["host"], spec["port"], 1, 2, timeout_s=SYNC_S, name=name)
    return spec, rx


def receive_ok(rx: WeightReceiver) -> dict:
    version, tensors = rx.receive_all()
    return {"version": version, "sums": {k: float(v.sum()) for k, v in tensors.items()}}


def receive_slowly(rx: WeightReceiver) -> None:
    """Takes the first tensor, then stops for longer than the sync deadline."""
    for _ in rx.receive():
        time.sleep(SYNC_S * 2)


def ready_signalled(spec: dict, ticket: str, within_s: float = 30.0) -> None:
    """Wait until rank 0 signalled `ticket`, asking the channel's store as a generator does
    (its own client: rank 0's own store object is busy in its send's waits)."""
    from datetime import timedelta

    import torch.distributed as dist

    store = dist.TCPStore(
        spec["host"], spec["port"], is_master=False, timeout=timedelta(seconds=within_s)
    )
    deadline = time.monotonic() + within_s
    while not store.check([ready_key(ticket)]):
        assert time.monotonic() < deadline, f"rank 0 never signalled {spec['name']}"
        time.sleep(0.01)


def expected_sums() -> dict:
    return {k: float(v.sum()) for k, v in STATE.items()}


def join_in_child(name: str, conn) -> None:
    """A generator's worker in its own process: join the channel, then receive rounds when
    told ("receive"), reporting each; the test kills it."""
    conn.send("imported")
    host, port = json.loads(conn.recv())
    rx = WeightReceiver(host, port, 1, 2, timeout_s=SYNC_S, name=name)
    conn.send("joined")
    while conn.recv() == "receive":
        version, _ = rx.receive_all()
        conn.send(f"received {version}")


def child_generator(rank: LearnerRank, name: str):
    """(process, pipe) of a generator whose worker joined `name`'s channel in a child."""
    ctx = mp.get_context("spawn")
    pipe, child = ctx.Pipe()
    proc = ctx.Process(target=join_in_child, args=(name, child), daemon=True)
    proc.start()
    assert pipe.poll(180) and pipe.recv() == "imported"
    spec = rank.open_weight_channel(name)
    pipe.send(json.dumps([spec["host"], spec["port"]]))
    assert pipe.poll(60) and pipe.recv() == "joined"
    return proc, pipe, spec


def killed_and_ok_sends(rank, proc, spec: dict, ticket: str, dead_first: bool):
    """Kill gen-dead's process (`proc`, joined on `spec`), then ask rank 0 to send to it
    (`ticket`) and to gen-ok (joined here); with `dead_first` gen-ok asks only once gen-dead's
    send holds the lock. Returns (gen-dead's send, gen-ok's send, what gen-ok received)."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    ok_spec, ok_rx = joined(rank, "gen-ok")
    dead, dead_out = in_thread(rank.send_weights, "gen-dead", ticket, spec["port"])
    if dead_first:
        ready_signalled(spec, ticket)  # its send holds the lock now
    ok, ok_out = in_thread(rank.send_weights, "gen-ok", "t-ok", ok_spec["port"])
    got = receive_ok(ok_rx)
    ok.join(SYNC_S * 3)
    dead.join(SYNC_S * 3)
    return dead_out, ok_out, got


@pytest.mark.timeout(300)
def test_a_generator_that_dies_before_its_round_is_named_and_the_others_sync_in_time():
    """gen-dead asked for weights and died before its workers started receiving (killed after
    joining its channel). Its send holds `WorkLock` first; gen-ok asks next. Rank 0 sees its
    closed link (learner/sync/peer_link.py) and gives up at once, naming it (a receiver alive but
    silent is given up on at the ready deadline: the never-confirms test below). Before: sends
    ran one at a time, so gen-ok waited for gen-dead's ready deadline (SYNC_S) and then failed
    its own lock wait."""
    rank = rank0()
    proc, _pipe, spec = child_generator(rank, "gen-dead")
    try:
        dead_out, ok_out, got = killed_and_ok_sends(rank, proc, spec, "t-dead", dead_first=True)
    finally:
        proc.kill()
    assert "error" not in ok_out, ok_out.get("error")
    assert got == {"version": 0, "sums": expected_sums()} and ok_out["value"]["version"] == 0
    assert ok_out["s"] < SYNC_S, ok_out["s"]  # not after gen-dead's deadline
    err = dead_out.get("error")
    assert err is not None and "rank 1 (gen-dead) died" in str(err), dead_out
    assert dead_out["s"] < SYNC_S / 2, dead_out["s"]  # its closed link: at once
    assert "gen-dead" not in rank.publisher._channels  # forgotten: a restarted one reopens


@pytest.mark.timeout(300)
def test_a_slow_receiver_is_given_up_on_at_the_sync_deadline_without_holding_the_others():
    """gen-slow takes the first tensor and then stalls past SYNC_S; gen-ok asks while gen-slow's
    send runs. Before: gen-ok waited for the lock behind gen-slow until its own deadline."""
    rank = rank0()
    slow_spec, slow_rx = joined(rank, "gen-slow")
    ok_spec, ok_rx = joined(rank, "gen-ok")
    stall, _ = in_thread(receive_slowly, slow_rx)
    slow, slow_out = in_thread(rank.send_weights, "gen-slow", "t-slow", slow_spec["port"])
    ready_signalled(slow_spec, "t-slow")
    time.sleep(0.5)  # gen-slow's round is under way
    ok, ok_out = in_thread(rank.send_weights, "gen-ok", "t-ok", ok_spec["port"])
    got = receive_ok(ok_rx)
    ok.join(SYNC_S * 3)
    slow.join(SYNC_S * 3)
    assert "error" not in ok_out, ok_out.get("error")
    assert got == {"version": 0, "sums": expected_sums()}
    assert ok_out["s"] < SYNC_S / 2, ok_out["s"]  # did not wait for gen-slow
    err = slow_out.get("error")
    assert err is not None and "rank 1 (gen-slow)" in str(err), slow_out
    assert "learner.sync_timeout_s" in str(err)
    assert SYNC_S * 0.9 < slow_out["s"] < SYNC_S * 2, slow_out["s"]  # at its deadline
    assert "gen-slow" not in rank.publisher._channels


@pytest.mark.timeout(300)
def test_a_generator_that_never_confirms_its_pause_holds_the_next_train_only_briefly():
    """Rank 0 signalled gen-silent (it holds `WorkLock`), and gen-silent never starts receiving
    (it died in its pause). The driver's next train starts within PAUSE_HOLD_S, not at the
    send's deadline; the send still fails naming gen-silent at that deadline. Before: rank 0
    held the lock up to SYNC_S, and the train waited for all of it."""
    rank = rank0()
    spec, _rx = joined(rank, "gen-silent")
    send, out = in_thread(rank.send_weights, "gen-silent", "t-1", spec["port"])
    ready_signalled(spec, "t-1")
    asked = time.monotonic()
    train, train_out = in_thread(rank.train, [])
    train.join(SYNC_S * 2)
    assert "error" not in train_out, train_out.get("error")
    held = rank.learner.entered[0] - asked
    assert held < PAUSE_HOLD_S + 1.5, held
    rank.publish()
    send.join(SYNC_S * 3)
    err = out.get("error")
    assert err is not None and "rank 1 (gen-silent)" in str(err), out
    assert "start receiving" in str(err) and out["s"] < SYNC_S * 1.5, out
    print(f"the train waited {held:.2f} s; the send failed after {out['s']:.2f} s")


@pytest.mark.timeout(300)
def test_a_generator_slow_to_pause_still_gets_its_weights_after_the_lock_was_let_go():
    """gen-late starts receiving 1 s after PAUSE_HOLD_S (a `between_groups` drain): rank 0 has
    let go of the lock meanwhile, takes it again and sends; the sync completes."""
    rank = rank0()
    spec, rx = joined(rank, "gen-late")
    send, out = in_thread(rank.send_weights, "gen-late", "t-1", spec["port"])
    ready_signalled(spec, "t-1")
    time.sleep(PAUSE_HOLD_S + 1.0)
    got = receive_ok(rx)
    send.join(SYNC_S * 2)
    assert "error" not in out, out.get("error")
    assert got == {"version": 0, "sums": expected_sums()} and out["value"]["version"] == 0


@pytest.mark.timeout(300)
def test_a_generator_that_died_after_a_sync_fails_its_next_send_at_once_and_is_forgotten():
    """gen-dead received round 0, then its process died. A send asked for it (its last request,
    still queued at rank 0) fails at once, naming it, instead of at the ready deadline; its
    channel is forgotten; gen-ok's sync meanwhile is not held. Before: rank 0 waited for the
    ready key until SYNC_S, holding the lock (and gen-ok) for all of it."""
    rank = rank0()
    proc, pipe, spec = child_generator(rank, "gen-dead")
    try:
        first, first_out = in_thread(rank.send_weights, "gen-dead", "t-0", spec["port"])
        pipe.send("receive")
        assert pipe.poll(60) and pipe.recv() == "received 0"
        first.join(SYNC_S * 2)
        assert "error" not in first_out, first_out.get("error")
        dead_out, ok_out, got = killed_and_ok_sends(rank, proc, spec, "t-1", dead_first=False)
    finally:
        proc.kill()
    err = dead_out.get("error")
    assert err is not None and "rank 1 (gen-dead) died" in str(err), dead_out
    assert dead_out["s"] < 1.5, dead_out["s"]  # at once, not at the deadline
    assert "gen-dead" not in rank.publisher._channels
    assert "error" not in ok_out and got == {"version": 0, "sums": expected_sums()}
    assert ok_out["s"] < SYNC_S / 2, ok_out["s"]

"""A weight broadcast never waits forever for a peer that joined and then stopped: a receiver
that stops taking tensors mid-transfer ends the sender's round, and a sender that joined but
never sends ends the receiver's, each with an error naming the peer and learner.sync_timeout_s.
Both sides are real gloo groups; the peers run in threads of this process."""

from __future__ import annotations

import threading

import pytest
import torch

from microcoder.learner.distributed import free_port
from microcoder.learner.sync.transport import WeightReceiver, WeightSender, WeightSyncError

DEADLINE_S = 2.0


def _pair(port: int) -> tuple[WeightSender, WeightReceiver]:
    """A sender and its one receiver (named stalled-generator), joined."""
    out: dict = {}

    def join() -> None:
        out["rx"] = WeightReceiver(
            "127.0.0.1", port, 1, 2, timeout_s=DEADLINE_S, name="stalled-generator"
        )

    thread = threading.Thread(target=join, daemon=True)
    thread.start()
    sender = WeightSender(
        "127.0.0.1", port, 1, timeout_s=DEADLINE_S, join_timeout_s=60, bucket_bytes=1 << 20
    )
    thread.join(60)
    return sender, out["rx"]


@pytest.mark.timeout(120)
def test_a_receiver_that_stops_mid_transfer_ends_the_send_naming_it_and_the_field():
    sender, rx = _pair(free_port())
    first = threading.Event()

    def stall() -> None:  # takes the first tensor of the round, then stops receiving
        next(rx.receive())
        first.set()

    threading.Thread(target=stall, daemon=True).start()
    tensors = [(f"w{i}", torch.full((1 << 18,), float(i))) for i in range(8)]  # 8 x 1 MiB
    with pytest.raises(WeightSyncError) as info:
        sender.send(tensors, version=1)
    assert first.is_set()  # it had joined and started the round: it stopped mid-transfer
    assert "rank 1 (stalled-generator)" in str(info.value)
    assert "raise learner.sync_timeout_s" in str(info.value)


@pytest.mark.timeout(120)
def test_a_sender_that_joined_but_never_sends_ends_the_receive_naming_it_and_the_field():
    sender, rx = _pair(free_port())  # the sender is alive and never calls send
    with pytest.raises(WeightSyncError) as info:
        rx.receive_all()
    assert "receiving from the learner (rank 0) failed or waited more than 2 s" in str(info.value)
    assert "raise learner.sync_timeout_s" in str(info.value)
    sender.close()

"""actors/weights/publisher.py `WeightPublisher`: each opening of a generator's channel is its own, so an
old send that fails cannot close the channel the generator opened since (issue 33, fault 5).
Real senders and receivers over gloo on loopback, the receivers on this test's threads."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from microcoder.actors.weights.publisher import WeightPublisher
from microcoder.learner.sync.transport import WeightReceiver, WeightSyncError


def in_thread(fn) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def body() -> None:
        try:
            out["result"] = fn()
        except BaseException as err:  # the test looks at it
            out["error"] = err

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


def join(spec: dict, label: str, timeout_s: float) -> WeightReceiver:
    return WeightReceiver(spec["host"], spec["port"], 1, 2, timeout_s=timeout_s, name=label)


@pytest.mark.timeout(60)
def test_an_old_sends_failure_leaves_the_channel_opened_since_alone():
    state = {"w": torch.arange(12.0).reshape(3, 4), "b": torch.ones(5, dtype=torch.bfloat16)}
    pub = WeightPublisher(timeout_s=2.0, host="127.0.0.1")
    pub.publish(1, state)
    first = join(pub.open_channel("gen-0", receivers=1), "gen-0 (first opening)", 10.0)
    # The generator never receives on its first channel (its receive timed out on its side):
    # rank 0's send waits for it until timeout_s, then fails. `first` stays referenced: a
    # receiver collected closes its link, and rank 0 would take it for dead at once.
    old, old_out = in_thread(lambda: pub.send("gen-0"))
    time.sleep(0.3)
    assert old.is_alive()  # still waiting for the generator
    new_rx = join(pub.open_channel("gen-0", receivers=1), "gen-0 (reopened)", 10.0)
    old.join(20)
    del first
    assert not old.is_alive(), "rank 0's old send did not give up within its deadline"
    assert isinstance(old_out.get("error"), WeightSyncError), old_out
    new, new_out = in_thread(lambda: pub.send("gen-0"))
    version, got = new_rx.receive_all()
    new.join(20)
    assert "error" not in new_out, new_out.get("error")
    assert new_out["result"]["version"] == version == 1
    assert got.keys() == state.keys()
    for name, tensor in state.items():
        assert torch.equal(got[name], tensor), name


@pytest.mark.timeout(60)
def test_a_failed_send_forgets_its_channel_so_the_generator_must_reopen():
    pub = WeightPublisher(timeout_s=1.0, host="127.0.0.1")
    pub.publish(3, {"w": torch.zeros(4)})
    join(pub.open_channel("gen-1", receivers=1), "gen-1", 10.0)
    with pytest.raises(WeightSyncError, match="gen-1"):
        pub.send("gen-1")  # the generator never receives
    with pytest.raises(RuntimeError, match="no weight channel to generator gen-1"):
        pub.send("gen-1")


def test_a_tied_head_is_published_once_under_the_embeddings_name():
    """One tensor under two names (a tied head) travels once, as the embedding: vLLM's Gemma2
    has no `lm_head` and refused the name, which failed every sync of a gemma2 run."""
    import torch

    from microcoder.actors.weights.publisher import WeightPublisher, served_names

    embed = torch.randn(8, 4)
    other = torch.randn(8, 4)
    state = {
        "model.embed_tokens.weight": embed,
        "model.norm.weight": torch.ones(4),
        "lm_head.weight": embed,
        "untied.weight": other,
        "same_values_other_storage.weight": embed.clone(),
    }
    kept = served_names(state)
    assert list(kept) == [
        "model.embed_tokens.weight",
        "model.norm.weight",
        "untied.weight",
        "same_values_other_storage.weight",
    ]
    view = {"a": embed, "b": embed.detach().contiguous()}  # a new tensor over the same storage
    assert list(served_names(view)) == ["a"]
    publisher = WeightPublisher(timeout_s=5, host="127.0.0.1")  # no channel opened
    publisher.publish(3, state)
    assert "lm_head.weight" not in publisher._state and publisher.version == 3

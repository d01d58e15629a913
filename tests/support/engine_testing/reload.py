"""One weight round driven by hand on a vLLM engine built with the worker extension
(actors/engines/worker_ext.py): the generator's part of a sync (actors/weights/pull.py), with a
local WeightPublisher in learner rank 0's place. The tests then compare greedy tokens (`greedy`)."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple


class Round(NamedTuple):
    """What one round left: the publisher (its channels), each worker's `mc_receive_and_load`
    reply (version, tensors, receive_s, reload_s), the send's reply and the tensors published."""

    publisher: Any
    loaded: list
    sent: dict
    tensors: int


def load_over_channel(llm: Any, folder, channel: str, timeout_s: float, device: str = "cpu"):
    """Publish `folder`'s weights (a saved model) as version 1, have `llm`'s workers join the
    weight channel `channel` (`mc_open_channel`) and receive and load them
    (`mc_receive_and_load`) while the publisher sends from a thread (joined within `timeout_s`),
    then drop the prefix cache (its blocks hold the old weights' keys and values)."""
    from transformers import AutoModelForCausalLM

    from microcoder.actors.weights.publisher import WeightPublisher

    publisher = WeightPublisher(timeout_s=timeout_s, device=device)
    state = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    publisher.publish(1, {k: v.detach().clone() for k, v in state.items()})
    llm.collective_rpc("mc_open_channel", args=(publisher.open_channel(channel),))
    sent: dict = {}
    thread = threading.Thread(target=lambda: sent.update(publisher.send(channel)))
    thread.start()
    loaded = llm.collective_rpc("mc_receive_and_load")
    thread.join(timeout_s)
    llm.reset_prefix_cache()
    return Round(publisher, loaded, sent, len(state))

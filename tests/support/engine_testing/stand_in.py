"""A stand-in for a generator's vLLM engine on the weight path: `collective_rpc` into its one
worker, which joins the weight channel (`mc_open_channel`) and receives each round whole on a
real WeightReceiver (`mc_receive_and_load`), as actors/engines/worker_ext.py does in a real engine."""

from __future__ import annotations


class ReceivingEngine:
    """What `pull_weights` uses of an engine; `tensors`: how many the last round held."""

    def __init__(self) -> None:
        self.receiver = None
        self.tensors = 0

    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        from microcoder.learner.sync.transport import WeightReceiver

        if method == "mc_open_channel":
            (spec,) = args
            self.receiver = WeightReceiver(
                spec["host"], spec["port"], 1, 2, timeout_s=spec["timeout_s"], name=spec["name"]
            )
            return [None]
        assert method == "mc_receive_and_load", method
        version, weights = self.receiver.receive_all()
        self.tensors = len(weights)
        return [(version, len(weights), 0.0, 0.0)]

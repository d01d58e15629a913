"""A vLLM worker extension: weight loading methods that run inside the engine's worker process.

vLLM mixes this class into its Worker (`worker_extension_cls=`), so the methods run where the
model lives and are called by name through `llm.collective_rpc("mc_...")`. Tensors cannot cross
`collective_rpc`, so the worker joins the learner's weight channel itself (`mc_open_channel`)
and receives and loads each round there (`mc_receive_and_load`, which loads through
`mc_load_weights`). The same path serves the in-process CPU engine (the worker is then the
generator actor's own process) and multi-process CUDA engines; docs/architecture.md §7.
With tensor parallelism every worker joins the channel with its own rank (1 + its rank in the
engine, actors/weight_sync.py `channel_rank`), receives the full tensors and loads its own
shard through vLLM's checkpoint-format weight loaders.
`mc_check_api` reports what of the vLLM API these methods call the running worker lacks
(actors/vllm_api.py); actors/engine.py calls it once the engine has started.

CPU pitfalls handled (docs/vllm-cpu.md §4): weights are loaded with `reload_weights` (plain
`load_weights` fails on oneDNN-prepacked linears), a tied `lm_head` is re-dispatched after the
reload, and the caller resets the prefix cache.
"""

from __future__ import annotations

import time
from typing import Any


class WeightLoaderExtension:
    """Methods added to vLLM's Worker; `self` is the worker (has `model_runner`)."""

    def mc_load_weights(self, named_tensors: list) -> int:
        """Load [(name, tensor), ...] in place; returns how many tensors were loaded."""
        self.reload_weights(weights_iterator=named_tensors, is_checkpoint_format=True)
        self._mc_fix_tied_lm_head()
        return len(named_tensors)

    def mc_check_api(self) -> list[str]:
        """What of the vLLM worker API the methods below call this worker lacks (empty: all)."""
        from microcoder.actors.vllm_api import worker_api_problems

        return worker_api_problems(self)

    def mc_open_channel(self, spec: dict[str, Any]) -> None:
        """Join the learner's weight channel described by `spec`, as this worker's own rank
        (1 + its rank in the engine; the channel has 1 + the engine's worker count ranks)."""
        from microcoder.actors.weight_sync import channel_rank
        from microcoder.learner.weight_sync import WeightReceiver

        rank, world = channel_rank(spec, int(self.rank), int(self.parallel_config.world_size))

        old = getattr(self, "_mc_receiver", None)
        if old is not None and hasattr(old, "close"):
            old.close()
        self._mc_receiver = WeightReceiver(
            spec["host"],
            spec["port"],
            rank,
            world,
            timeout_s=spec["timeout_s"],
            name=spec["name"] if world == 2 else f"{spec['name']} tp-worker {rank - 1}",
            device=spec.get("device", "cpu"),
        )

    def mc_receive_and_load(self) -> tuple[int, int, float, float]:
        """Receive one round of weights on the open channel and load them;
        (version, tensors, receive seconds, reload seconds)."""
        receiver = getattr(self, "_mc_receiver", None)
        if receiver is None:
            raise RuntimeError(
                "no weight channel is open in this worker; call mc_open_channel first"
            )
        t0 = time.perf_counter()
        named = list(receiver.receive())
        t1 = time.perf_counter()
        count = self.mc_load_weights(named)
        return int(receiver.version), count, t1 - t0, time.perf_counter() - t1

    def _mc_fix_tied_lm_head(self) -> None:
        model = self.model_runner.model
        if not getattr(model.config, "tie_word_embeddings", False):
            return
        if self.device_config.device.type != "cpu":
            return
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

        dispatch_cpu_unquantized_gemm(model.lm_head, remove_weight=False)

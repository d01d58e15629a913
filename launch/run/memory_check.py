"""The memory plan of a run's config: the learner rank's and each generator GPU's bytes, printed by
`microcoder launch CONFIG --dry-run --cluster-gpus N [--gpu-memory-gb G]`, and the refusal of a
recipe that will not fit, naming the knob to change. The counting is learner/models/memory_plan.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from microcoder.launch.config import Config
from microcoder.learner.models.memory_plan import (
    GeneratorPlan,
    GiB,
    LearnerPlan,
    ModelShape,
    ShapeError,
    largest_fitting,
    plan_generator,
    plan_learner,
)

DEFAULT_GPU_GB = 80.0
"""GPU memory the dry-run plans with when --gpu-memory-gb is not given (an H100/A100 80 GB)."""


@dataclass
class MemoryReport:
    """The plan's lines to print and the errors that refuse the launch (each names a knob)."""

    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run_shape(cfg: Config) -> ModelShape:
    """The model's shape from model.path/config.json; the tiny model's when it will be built."""
    folder = Path(cfg.model.path)
    if not (folder / "config.json").is_file() and cfg.model.build_tiny:
        from microcoder.learner.models.tiny_model import TINY_ARCH

        vocab = cfg.warmstart.vocab_size if cfg.model.warmstart else 4096
        return ModelShape.from_config(
            {**TINY_ARCH, "model_type": "qwen2", "vocab_size": vocab, "tie_word_embeddings": False}
        )
    return ModelShape.from_folder(folder)


def learner_inputs(cfg: Config, device: str) -> dict:
    """plan_learner's keyword arguments for this config on `device`."""
    lr, g, a = cfg.learner, cfg.generator, cfg.algorithm
    dtype = lr.dtype if lr.dtype != "auto" else ("bfloat16" if device == "cuda" else "float32")
    per_rank = a.group_size * lr.batch_size * (g.max_prompt_tokens + g.max_response_tokens)
    several = per_rank / (lr.mini_batches * lr.world_size) > lr.micro_batch_tokens
    return dict(
        world_size=lr.world_size,
        compute_bytes=2 if dtype == "bfloat16" else 4,
        micro_batch_tokens=lr.micro_batch_tokens,
        logprob_chunk_tokens=lr.logprob_chunk_tokens,
        activation_checkpointing=bool(lr.activation_checkpointing),
        grad_accumulation_unsharded=several and lr.grad_sync == "last_micro_batch",
        reference_model=a.kl_coef > 0,
    )


def learner_room(cfg: Config, gpu_bytes: int) -> tuple[int, str]:
    """Bytes the learner rank may use on its GPU, and why: all of it, or what the generator
    engines sharing its GPU leave (vLLM claims gpu_memory_utilization of the whole GPU each)."""
    g, lr = cfg.generator, cfg.learner
    share, gshare = lr.gpus_per_rank, g.gpus_per_engine
    if 0 < share < 1 and lr.world_size == 1 and 0 < gshare < 1 and g.num_engines:
        beside = min(g.num_engines, math.floor((1 - share) / gshare + 1e-9))
        left = max(0.0, 1 - beside * g.gpu_memory_utilization)
        return int(gpu_bytes * left), f"{left:.0%} of the GPU beside {beside} engine(s)"
    return gpu_bytes, "the whole GPU"


def _gib(n: int) -> str:
    return f"{n / GiB:.2f} GiB"


def _row(label: str, n: int, tail: str = "") -> str:
    return f"    {label:<36} {_gib(n):>11}" + (f"  {tail}" if tail else "")


def learner_lines(plan: LearnerPlan, inputs: dict) -> list[str]:
    on = inputs["activation_checkpointing"]
    run = "<- this run"
    sync = "(learner.grad_sync = last_micro_batch)" if plan.accumulated_grads else ""
    return [
        f"  learner rank (FSDP2 over {inputs['world_size']}, "
        f"{'bf16' if inputs['compute_bytes'] == 2 else 'fp32'} compute):",
        _row("params (fp32 shard)", plan.params),
        _row("gradients (fp32 shard)", plan.grads),
        _row("AdamW moments (shard)", plan.optimizer),
        _row("unsharded params (root + 2 layers)", plan.unsharded_params),
        _row("unsharded head gradient", plan.unsharded_grads),
        _row("head gradient of the chunks", plan.head_grad_chunks),
        _row("accumulated unsharded gradients", plan.accumulated_grads, sync),
        _row("activations, checkpointing off", plan.activations_no_ckpt, "" if on else run),
        _row("activations, checkpointing on", plan.activations_ckpt, run if on else ""),
        _row("log-prob head (logit blocks)", plan.logprob_head),
        _row("publish, on the device", plan.publish_device),
        _row("publish, host copy on rank 0", plan.publish_host, "(host memory)"),
        _row("reference model", plan.reference),
        _row("peak: backward", plan.backward_peak()),
        _row("peak: optimizer step", plan.optimizer_peak()),
        _row("peak", plan.peak()),
    ]


def learner_knob(shape: ModelShape, inputs: dict, room: int, gpu_bytes: int) -> str:
    """What to change so the learner rank fits in `room` bytes (more ranks: whole GPUs of
    `gpu_bytes` each), as a sentence."""
    on = {**inputs, "activation_checkpointing": True}
    if not inputs["activation_checkpointing"] and plan_learner(shape, **on).peak() <= room:
        return "set learner.activation_checkpointing = true"
    tokens = largest_fitting("micro_batch_tokens", room, shape, inputs["micro_batch_tokens"], **on)
    if tokens >= 1024:
        ckpt = "" if inputs["activation_checkpointing"] else "set learner.activation_checkpointing"
        return (
            ckpt + " = true and " if ckpt else ""
        ) + f"lower learner.micro_batch_tokens to {tokens}"
    if inputs["logprob_chunk_tokens"] == 0:
        chunked = {**on, "logprob_chunk_tokens": 1024}
        if plan_learner(shape, **chunked).peak() <= room:
            return "set learner.logprob_chunk_tokens = 1024 and learner.activation_checkpointing = true"
    world = largest_fitting("world_size", gpu_bytes, shape, 1024, **on)
    if world:
        return (
            f"raise learner.world_size to {world} (with learner.gpus_per_rank = 1 and "
            "learner.activation_checkpointing = true): the fp32 weights, gradients and AdamW "
            "moments alone need 16 bytes per parameter, shared by the ranks"
        )
    return "the model does not fit on any number of these GPUs; use GPUs with more memory"


def generator_lines(plan: GeneratorPlan, tp: int, inflight: int) -> list[str]:
    return [
        f"  generator engine (per GPU, tensor parallel {tp}):",
        _row("weights (TP shard)", plan.weights),
        _row("gpu_memory_utilization", plan.budget),
        _row("activation reserve", plan.reserve),
        _row(
            "KV cache left",
            plan.kv_cache,
            f"= {plan.sequences} sequences of {plan.sequence_tokens} tokens at once (the engine "
            f"keeps up to {inflight} in flight)",
        ),
    ]


def memory_report(cfg: Config, device: str, gpu_gb: float = DEFAULT_GPU_GB) -> MemoryReport:
    """The plan's lines and, on cuda, the errors of parts that do not fit in `gpu_gb` GiB."""
    out = MemoryReport()
    try:
        shape = run_shape(cfg)
    except ShapeError as err:
        out.errors.append(f"memory plan: {err}")
        return out
    gpu = int(gpu_gb * GiB)
    inputs = learner_inputs(cfg, device)
    lplan = plan_learner(shape, **inputs)
    room, why = learner_room(cfg, gpu)
    out.lines.append(
        f"memory plan ({shape.params() / 1e9:.2f} B parameters; GPU {gpu_gb:g} GiB"
        + ("" if device == "cuda" else "; device cpu: not checked")
        + "):"
    )
    out.lines += learner_lines(lplan, inputs)
    out.lines.append(_row("room on its GPU", room, f"({why})"))
    g = cfg.generator
    tp = max(1, int(g.gpus_per_engine))
    gplan = plan_generator(
        shape,
        tensor_parallel=tp,
        dtype_bytes=4 if g.dtype == "float32" or (g.dtype == "auto" and device != "cuda") else 2,
        gpu_bytes=gpu,
        gpu_memory_utilization=g.gpu_memory_utilization,
        max_prompt_tokens=g.max_prompt_tokens,
        max_response_tokens=g.max_response_tokens,
    )
    inflight = g.max_inflight_prompts * cfg.algorithm.group_size
    out.lines += generator_lines(gplan, tp, inflight)
    if device != "cuda":
        return out
    if lplan.peak() > room:
        out.errors.append(
            f"memory plan: a learner rank needs {_gib(lplan.peak())} and has {_gib(room)} on a "
            f"{gpu_gb:g} GiB GPU; {learner_knob(shape, inputs, room, gpu)}"
        )
    if g.num_engines and gplan.sequences < 1:
        need = gplan.weights + gplan.reserve + gplan.kv_bytes_per_token * gplan.sequence_tokens
        out.errors.append(
            f"memory plan: a generator GPU holds {_gib(gplan.weights)} of weights and its KV cache "
            f"cannot hold one sequence of {gplan.sequence_tokens} tokens within "
            f"generator.gpu_memory_utilization = {g.gpu_memory_utilization:g} of {gpu_gb:g} GiB; "
            f"raise generator.gpu_memory_utilization to {min(1.0, need / gpu + 0.01):.2f} or "
            f"generator.gpus_per_engine (tensor parallel) to {2 * tp}, or lower "
            "generator.max_response_tokens"
        )
    return out


def dry_run_memory(cfg: Config, cluster_gpus: float | None, gpu_gb: float | None) -> int:
    """Print the memory plan for `launch --dry-run`; 2 when it refuses the recipe, else 0."""
    device = cfg.cluster.device
    if device == "auto":
        device = "cuda" if cluster_gpus else "cpu"
    report = memory_report(cfg, device, DEFAULT_GPU_GB if gpu_gb is None else gpu_gb)
    print("\n".join(report.lines))
    for error in report.errors:
        print(f"launch: {error}")
    return 2 if report.errors else 0


def launch_memory_errors(cfg: Config, device: str) -> list[str]:
    """The memory plan's refusals for a local launch on this machine's GPUs (the smallest one's
    memory); [] on cpu. A joined cluster's GPUs are not visible from the driver: check those with
    `launch --dry-run --cluster-gpus N --gpu-memory-gb G`."""
    if device != "cuda":
        return []
    import torch

    if not torch.cuda.is_available():
        return []
    sizes = [
        torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())
    ]
    return memory_report(cfg, device, min(sizes) / GiB).errors

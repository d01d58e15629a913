"""The memory plan of a run's config: the learner rank's and each generator GPU's bytes, and the
learner's host memory per node, printed by `microcoder launch CONFIG --dry-run --cluster-gpus N
[--gpu-memory-gb G] [--host-memory-gb M] [--gpus-per-node K] [--flash-attn]`, and the refusal of
a recipe that will not fit, naming the knobs that would help (launch/run/memory_knobs.py). The
counting is learner/models/memory_plan.py's.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path

from microcoder.launch.config import Config
from microcoder.launch.run.memory_knobs import learner_knob
from microcoder.learner.models.memory_plan import (
    CHECKPOINT_WRITE_BYTES_PER_S,
    GeneratorPlan,
    GiB,
    LearnerPlan,
    ModelShape,
    SavePlan,
    ShapeError,
    host_per_node,
    plan_generator,
    plan_learner,
    plan_save,
    trajectory_tokens,
)
from microcoder.learner.models.tiny_model import TINY_ARCH

DEFAULT_GPU_GB = 80.0
"""GPU memory the dry-run plans with when --gpu-memory-gb is not given (an H100/A100 80 GB)."""

DEFAULT_GPUS_PER_NODE = 8
"""GPUs of one node the dry-run plans with when --gpus-per-node is not given."""


@dataclass
class MemoryReport:
    """The plan's lines to print and the errors that refuse the launch (each names a knob)."""

    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run_shape(cfg: Config) -> ModelShape:
    """The model's shape from model.path/config.json with model.config_overrides (a window
    switched on, say, changes the plan); the tiny model's when it will be built."""
    folder = Path(cfg.model.path)
    if not (folder / "config.json").is_file() and cfg.model.build_tiny:
        vocab = cfg.warmstart.vocab_size if cfg.model.warmstart else 4096
        return ModelShape.from_config(
            {**TINY_ARCH, "model_type": "qwen2", "vocab_size": vocab, "tie_word_embeddings": False}
        )
    return ModelShape.from_folder(folder, cfg.model.config_overrides)


def local_flash() -> bool:
    """Whether this machine would pick flash-attn (learner/attention.py: `choose`): it is
    installed and torch sees a GPU. torch is imported only when flash_attn is there."""
    if importlib.util.find_spec("flash_attn") is None:
        return False
    import torch

    from microcoder.learner.attention import flash_available

    return torch.cuda.is_available() and flash_available()


def planned_kernel(cfg: Config, device: str, flash_attn: bool | None) -> tuple[str, str]:
    """(the attention kernel the plan assumes, why): learner.attn_implementation when it names
    one; for "auto", flash-attn when `flash_attn` is true (--flash-attn: the learner's GPUs have
    it), when None this machine's choice, else microcoder's varlen attention."""
    impl = cfg.learner.attn_implementation
    if impl == "flash_attention_2":
        return "flash", "learner.attn_implementation = flash_attention_2"
    if impl == "eager":
        return "eager", "learner.attn_implementation = eager: [L, L] scores on every layer"
    if impl != "auto":
        return "varlen", f"learner.attn_implementation = {impl}"
    if device == "cuda" and (flash_attn or (flash_attn is None and local_flash())):
        return "flash", "flash-attn on the learner's GPUs (" + (
            "--flash-attn)" if flash_attn else "installed here)"
        )
    return "varlen", (
        "microcoder varlen SDPA: flash-attn not assumed"
        + ("; pass --flash-attn if the learner's GPUs have it" if device == "cuda" else "")
    )


def longest_sequence(cfg: Config) -> int:
    """Tokens of the run's longest sequence: prompt + response for a single turn; under a
    multi-turn environment the whole trajectory, environment.max_turns responses with the
    planned feedback between them (learner/models/memory_plan.py: `trajectory_tokens`)."""
    g = cfg.generator
    env = cfg.environment
    turns = 1 if env.kind == "single" else env.max_turns
    return trajectory_tokens(g.max_prompt_tokens, g.max_response_tokens, turns, env.feedback_chars)


def learner_inputs(cfg: Config, device: str, kernel: str = "varlen") -> dict:
    """plan_learner's keyword arguments for this config on `device`, with attention `kernel`."""
    lr = cfg.learner
    a = cfg.algorithm
    dtype = lr.dtype if lr.dtype != "auto" else ("bfloat16" if device == "cuda" else "float32")
    longest = longest_sequence(cfg)
    per_rank = a.group_size * lr.batch_size * longest
    data_ranks = lr.world_size // lr.sequence_parallel  # an SP group shares its micro-batches
    several = per_rank / (lr.mini_batches * data_ranks) > lr.micro_batch_tokens
    return dict(
        world_size=lr.world_size,
        compute_bytes=2 if dtype == "bfloat16" else 4,
        micro_batch_tokens=lr.micro_batch_tokens,
        logprob_chunk_tokens=lr.logprob_chunk_tokens,
        activation_checkpointing=bool(lr.activation_checkpointing),
        grad_accumulation_unsharded=several and lr.grad_sync == "last_micro_batch",
        reference_model=a.kl_coef > 0,
        longest_sequence=longest,
        sequence_parallel=lr.sequence_parallel,
        offload=lr.offload,
        replicas=lr.replicas,
        kernel=kernel,
        **lora_inputs(lr.lora),
    )


def lora_inputs(lora) -> dict:
    """plan_learner's LoRA arguments for `learner.lora` (none when it is off)."""
    if lora is None:
        return {}
    return dict(
        lora_rank=lora.rank, lora_targets=tuple(lora.targets), lora_dropout=lora.dropout > 0
    )


def ranks_per_node(cfg: Config, gpus_per_node: int) -> int:
    """Learner ranks on its fullest node: as many as the node's GPUs hold (all on a CPU run)."""
    lr = cfg.learner
    if lr.gpus_per_rank <= 0:
        return lr.world_size
    return max(1, min(lr.world_size, math.floor(gpus_per_node / lr.gpus_per_rank + 1e-9)))


def learner_room(cfg: Config, gpu_bytes: int) -> tuple[int, str]:
    """Bytes the learner rank may use on its GPU, and why: all of it, or what the generator
    engines sharing its GPU leave (vLLM claims gpu_memory_utilization of the whole GPU each)."""
    g = cfg.generator
    lr = cfg.learner
    share = lr.gpus_per_rank
    gshare = g.gpus_per_engine
    engines = g.num_engines + cfg.eval.generators  # the eval's set-aside engines too
    if 0 < share < 1 and lr.world_size == 1 and 0 < gshare < 1 and engines:
        beside = min(engines, math.floor((1 - share) / gshare + 1e-9))
        left = max(0.0, 1 - beside * g.gpu_memory_utilization)
        return int(gpu_bytes * left), f"{left:.0%} of the GPU beside {beside} engine(s)"
    return gpu_bytes, "the whole GPU"


def _gib(n: int) -> str:
    return f"{n / GiB:.2f} GiB"


def _row(label: str, n: int, tail: str = "") -> str:
    return f"    {label:<36} {_gib(n):>11}" + (f"  {tail}" if tail else "")


def params_label(plan: LearnerPlan) -> str:
    """The params row's label: fp32 masters, or under LoRA the frozen base and fp32 adapters."""
    return "params (frozen base + fp32 adapters)" if plan.lora_params else "params (fp32)"


def _lora_rows(plan: LearnerPlan, inputs: dict) -> list[str]:
    """Under LoRA, a line saying what trains (the rows below count the adapters alone)."""
    if not plan.lora_params:
        return []
    return [
        f"    LoRA rank {inputs['lora_rank']} on {', '.join(inputs['lora_targets'])}: "
        f"{plan.lora_params / 1e6:.1f} M adapter parameters train (fp32 masters, AdamW); the "
        "base is frozen in the compute dtype"
    ]


def save_plan(shape, inputs: dict, per_node: int, lora_params: int = 0) -> SavePlan:
    """The asynchronous checkpoint at the recipe's size (learner/models/memory_plan.py)."""
    replicas = inputs.get("replicas", 1)
    return plan_save(
        shape, inputs["world_size"], inputs["compute_bytes"], per_node, replicas, lora_params
    )


def save_lines(shape, inputs: dict, per_node: int, lora_params: int = 0) -> list[str]:
    """A checkpoint off the training loop: the host memory of its snapshot, its bytes and the
    estimated seconds of the background write (learner/models/memory_plan.py: plan_save)."""
    save = save_plan(shape, inputs, per_node, lora_params)
    rate = CHECKPOINT_WRITE_BYTES_PER_S / 1e9
    return [
        _row(
            "checkpoint snapshot, host per node",
            save.snapshot_host,
            "(while a save is written; on top of the host memory above)",
        ),
        _row(
            "checkpoint size",
            save.total,
            f"(~{save.seconds:.0f} s per save in the background at an assumed {rate:g} GB/s "
            "per node)",
        ),
    ]


STATE_ROWS = (
    ("gradients (fp32)", "grads"),
    ("AdamW moments", "optimizer"),
    ("unsharded params (root + 2 layers)", "unsharded_params"),
    ("unsharded head gradient", "unsharded_grads"),
    ("unsharded layer gradient", "layer_grad"),
    ("head gradient of the chunks", "head_grad_chunks"),
)
"""The learner plan's rows after the params, each (label, LearnerPlan field)."""
WORK_ROWS = (
    ("  attention scores (one layer)", "attention_scores"),
    ("  all-to-all buffers (one layer)", "sp_buffers"),
    ("log-prob head (logit blocks)", "logprob_head"),
    ("optimizer step temporaries", "optimizer_temp"),
    ("publish, on the device", "publish_device"),
    ("reference model", "reference"),
)
"""The rows after the activations, each (label, LearnerPlan field)."""


def _plain_rows(plan: LearnerPlan, table: tuple[tuple[str, str], ...]) -> list[str]:
    return [_row(label, getattr(plan, field)) for label, field in table]


def learner_lines(plan: LearnerPlan, inputs: dict, why_kernel: str) -> list[str]:
    on = inputs["activation_checkpointing"]
    run = "<- this run"
    sync = "(learner.grad_sync = last_micro_batch)" if plan.accumulated_grads else ""
    shard = inputs["world_size"] // inputs["replicas"]
    mesh = (
        f"HSDP {inputs['replicas']} x {shard}" if inputs["replicas"] > 1 else f"FSDP2 over {shard}"
    )
    sp = inputs["sequence_parallel"]
    where = {"none": "shard", "optimizer": "shard; moments on the host", "params": "host"}
    return [
        f"  learner rank ({mesh}, {'bf16' if inputs['compute_bytes'] == 2 else 'fp32'} compute, "
        f"sequence parallel {sp}, offload {inputs['offload']}):",
        f"    micro-batch of this rank: {plan.tokens} tokens (max(learner.micro_batch_tokens = "
        f"{inputs['micro_batch_tokens']}, longest sequence {inputs['longest_sequence']})"
        + (f" / {sp}" if sp > 1 else "")
        + ")",
        f"    attention kernel assumed: {plan.kernel} ({why_kernel})",
        *_lora_rows(plan, inputs),
        _row(params_label(plan), plan.params, where[inputs["offload"]]),
        *_plain_rows(plan, STATE_ROWS),
        _row("accumulated unsharded gradients", plan.accumulated_grads, sync),
        _row("activations, checkpointing off", plan.activations_no_ckpt, "" if on else run),
        _row("activations, checkpointing on", plan.activations_ckpt, run if on else ""),
        *_plain_rows(plan, WORK_ROWS),
        _row("peak: backward", plan.backward_peak()),
        _row("peak: optimizer step", plan.optimizer_peak()),
        _row("peak", plan.peak()),
        _row("host: offloaded states per rank", plan.host, "(host memory)"),
        _row("host: publish copy on rank 0", plan.publish_host, "(host memory)"),
    ]


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


def eval_generator_line(cfg: Config, tp: int) -> str:
    """The generators set aside for the eval (eval.generators): engines like the ones above."""
    n = cfg.eval.generators
    gpus = n * cfg.generator.gpus_per_engine
    return (
        f"  eval generators (eval.generators = {n}): {n} more engine(s) as above, tensor "
        f"parallel {tp} ({gpus:g} GPU(s) in all on a GPU run: generator.gpus_per_engine each)"
    )


def generator_plan(
    shape: ModelShape, cfg: Config, tp: int, gpu: int, dtype_bytes: int
) -> GeneratorPlan:
    """The plan of one generator GPU of this config at tensor parallel `tp` on `gpu` bytes."""
    g = cfg.generator
    return plan_generator(
        shape,
        tensor_parallel=tp,
        dtype_bytes=dtype_bytes,
        gpu_bytes=gpu,
        gpu_memory_utilization=g.gpu_memory_utilization,
        max_prompt_tokens=g.max_prompt_tokens,
        # a multi-turn trajectory's last turn continues the whole conversation
        max_response_tokens=longest_sequence(cfg) - g.max_prompt_tokens,
    )


def generator_refusal(
    shape: ModelShape, plan: GeneratorPlan, cfg: Config, tp: int, gpu: int, dtype_bytes: int
) -> str:
    """Why a generator GPU cannot hold one sequence, and the changes that would let it: a
    gpu_memory_utilization that fits (up to 0.95), the smallest tensor parallel that does."""
    g = cfg.generator
    need = plan.weights + plan.reserve + plan.kv_bytes_per_token * plan.sequence_tokens
    knobs = []
    if need / gpu + 0.01 <= 0.95:
        knobs.append(f"raise generator.gpu_memory_utilization to {need / gpu + 0.01:.2f}")
    for more in (2 * tp, 4 * tp, 8 * tp):
        if generator_plan(shape, cfg, more, gpu, dtype_bytes).sequences >= 1:
            knobs.append(f"raise generator.gpus_per_engine (tensor parallel) to {more}")
            break
    knobs.append("lower generator.max_response_tokens")
    if cfg.environment.kind != "single" and cfg.environment.max_turns > 1:
        knobs.append("lower environment.max_turns")
    return (
        f"memory plan: a generator GPU holds {_gib(plan.weights)} of weights and its KV cache "
        f"cannot hold one sequence of {plan.sequence_tokens} tokens within "
        f"generator.gpu_memory_utilization = {g.gpu_memory_utilization:g} of {gpu / GiB:g} GiB; "
        + " or ".join(knobs)
    )


@dataclass(frozen=True)
class ClusterMemory:
    """What the plan checks against: one GPU's memory, and a node's host memory and GPUs."""

    gpu_gb: float = DEFAULT_GPU_GB
    """Memory of one GPU, GiB (--gpu-memory-gb)."""
    host_gb: float | None = None
    """Host memory of one node, GiB (--host-memory-gb); None = not checked."""
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    """GPUs of one node (--gpus-per-node): how many learner ranks share a node's host memory."""
    flash_attn: bool | None = False
    """The learner's GPUs have flash-attn (--flash-attn); None = what this machine would pick."""


def memory_report(
    cfg: Config, device: str, gpu_gb: float = DEFAULT_GPU_GB, cluster: ClusterMemory | None = None
) -> MemoryReport:
    """The plan's lines and, on cuda, the errors of parts that do not fit in `gpu_gb` GiB (and,
    when `cluster.host_gb` is given, in a node's host memory)."""
    out = MemoryReport()
    cluster = cluster or ClusterMemory(gpu_gb=gpu_gb)
    gpu_gb = cluster.gpu_gb
    try:
        shape = run_shape(cfg)
    except ShapeError as err:
        out.errors.append(f"memory plan: {err}")
        return out
    gpu = int(gpu_gb * GiB)
    kernel, why_kernel = planned_kernel(cfg, device, cluster.flash_attn)
    inputs = learner_inputs(cfg, device, kernel)
    lplan = plan_learner(shape, **inputs)
    room, why = learner_room(cfg, gpu)
    moe = (
        f", {shape.experts} experts, {shape.active_params() / 1e9:.2f} B active"
        if shape.experts
        else ""
    )
    out.lines.append(
        f"memory plan ({shape.params() / 1e9:.2f} B parameters{moe}; GPU {gpu_gb:g} GiB"
        + ("" if device == "cuda" else "; device cpu: not checked")
        + "):"
    )
    out.lines += learner_lines(lplan, inputs, why_kernel)
    out.lines.append(_row("room on its GPU", room, f"({why})"))
    per_node = ranks_per_node(cfg, cluster.gpus_per_node)
    host = host_per_node(lplan, per_node)
    host_room = (
        "not checked: pass --host-memory-gb"
        if cluster.host_gb is None
        else (f"of {cluster.host_gb:g} GiB")
    )
    out.lines.append(_row("host memory per node", host, f"({per_node} ranks; {host_room})"))
    out.lines += save_lines(shape, inputs, per_node, lplan.lora_params)
    g = cfg.generator
    tp = max(1, int(g.gpus_per_engine))
    gen_bytes = 4 if g.dtype == "float32" or (g.dtype == "auto" and device != "cuda") else 2
    gplan = generator_plan(shape, cfg, tp, gpu, gen_bytes)
    inflight = g.max_inflight_prompts * cfg.algorithm.group_size
    out.lines += generator_lines(gplan, tp, inflight)
    if cfg.eval.generators:
        out.lines.append(eval_generator_line(cfg, tp))
    if device != "cuda":
        return out
    if lplan.peak() > room:
        out.errors.append(
            f"memory plan: a learner rank needs {_gib(lplan.peak())} and has {_gib(room)} on a "
            f"{gpu_gb:g} GiB GPU; {learner_knob(shape, inputs, room, gpu)}"
        )
    if cluster.host_gb is not None and host > cluster.host_gb * GiB:
        out.errors.append(
            f"memory plan: the learner needs {_gib(host)} of host memory on a node ({per_node} "
            f'ranks x {_gib(lplan.host)} offloaded with learner.offload = "{lplan.offload}", '
            f"and rank 0's {_gib(lplan.publish_host)} published copy) and a node has "
            f"{cluster.host_gb:g} GiB (--host-memory-gb); offload less (learner.offload) or "
            "raise learner.world_size over more nodes, so each rank holds a smaller shard"
        )
    elif cluster.host_gb is not None:
        out.errors += snapshot_refusal(
            cfg, host, save_plan(shape, inputs, per_node, lplan.lora_params), per_node, cluster
        )
    if g.num_engines and gplan.sequences < 1:
        out.errors.append(generator_refusal(shape, gplan, cfg, tp, gpu, gen_bytes))
    return out


def snapshot_refusal(
    cfg: Config, host: int, save: SavePlan, per_node: int, cluster: ClusterMemory
) -> list[str]:
    """The refusal of a recipe whose learner fits a node's host memory (--host-memory-gb) until
    a checkpoint's snapshot comes on top: while a save is written, each learner rank on the node
    holds a host copy of its shard of the fp32 masters and AdamW state, and rank 0 its copy of
    the weights in the serving dtype (learner/checkpoint.py start_save). [] when it fits."""
    need = host + save.snapshot_host
    if need <= cluster.host_gb * GiB:
        return []
    return [
        f"memory plan: while a checkpoint is written, a learner node needs {_gib(need)} of "
        f"host memory: the learner's {_gib(host)} and the checkpoint snapshot's "
        f"{_gib(save.snapshot_host)} ({per_node} rank(s)' shards of the fp32 masters and AdamW "
        f"state, and rank 0's copy of the weights), and a node has {cluster.host_gb:g} GiB "
        "(--host-memory-gb). Every save snapshots (the one at the end of the run too; "
        f"learner.checkpoint_every = {cfg.learner.checkpoint_every} only sets how often): use "
        "nodes with more host memory, raise learner.world_size over more nodes (each rank "
        "snapshots a smaller shard), or offload less (learner.offload)"
    ]


def dry_run_memory(
    cfg: Config,
    cluster_gpus: float | None,
    gpu_gb: float | None,
    host_gb: float | None = None,
    gpus_per_node: int | None = None,
    flash_attn: bool = False,
) -> int:
    """Print the memory plan for `launch --dry-run`; 2 when it refuses the recipe, else 0.
    Without --flash-attn, flash-attn is assumed only where this machine has it and a GPU."""
    device = cfg.cluster.device
    if device == "auto":
        device = "cuda" if cluster_gpus else "cpu"
    cluster = ClusterMemory(
        gpu_gb=DEFAULT_GPU_GB if gpu_gb is None else gpu_gb,
        host_gb=host_gb,
        gpus_per_node=gpus_per_node or DEFAULT_GPUS_PER_NODE,
        flash_attn=True if flash_attn else None,
    )
    report = memory_report(cfg, device, cluster=cluster)
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
    cluster = ClusterMemory(gpu_gb=min(sizes) / GiB, flash_attn=None)
    return memory_report(cfg, device, cluster=cluster).errors


WARN_FRACTION = 0.9
"""A learner rank whose measured device peak passes this fraction of its GPU is warned about."""


def planned_learner(cfg: Config, device: str) -> LearnerPlan | None:
    """The memory plan of one learner rank of this config on `device` (None when the model's
    config.json cannot be read)."""
    try:
        shape = run_shape(cfg)
    except (ShapeError, OSError, ValueError):
        return None
    kernel, _ = planned_kernel(cfg, device, None)
    return plan_learner(shape, **learner_inputs(cfg, device, kernel))


def learner_memory_lines(cfg: Config, ranks: dict | None, step: int = 1) -> list[str]:
    """At a launch's first step (`step`): each learner rank's measured peak next to the plan's
    (`ranks`: the step record's memory["learner"], launch/monitor/memory_view.py). On CUDA the
    device peak against the planned peak, with a warning past WARN_FRACTION of the GPU; on CPU
    the peak RSS against the plan's tensors (the device is host memory there, and the process
    adds Python, torch and their libraries)."""
    if not ranks:
        return []
    cuda = any("device_peak_bytes" in f for f in ranks.values())
    plan = planned_learner(cfg, "cuda" if cuda else "cpu")
    lines = []
    for actor, f in ranks.items():
        if "device_peak_bytes" not in f:
            tensors = ""
            if plan is not None:
                host = plan.peak() + plan.host + (plan.publish_host if actor.endswith("-0") else 0)
                tensors = f"; the memory plan's tensors {_gib(host)} (device peak and host parts)"
            lines.append(
                f"memory at step {step}: {actor} peak RSS {_gib(f.get('peak_rss_bytes', 0))} "
                f"(now {_gib(f.get('rss_bytes', 0))}){tensors}"
            )
            continue
        peak = int(f["device_peak_bytes"])
        total = int(f.get("device_total_bytes") or 0)
        planned = f" vs planned {_gib(plan.peak())}" if plan is not None else ""
        share = f" ({peak / total:.0%} of its {_gib(total)} GPU)" if total else ""
        lines.append(
            f"memory at step {step}: {actor} device peak {_gib(peak)}{planned}{share}; reserved "
            f"{_gib(f.get('device_reserved_bytes', 0))}; RSS {_gib(f.get('rss_bytes', 0))}"
        )
        if total and peak > WARN_FRACTION * total:
            lines.append(
                f"warning: {actor} peaked at {peak / total:.0%} of its GPU's memory (over "
                f"{WARN_FRACTION:.0%}): a longer batch may run out of it. Lower "
                "learner.micro_batch_tokens, turn learner.activation_checkpointing on or "
                "offload (learner.offload); `microcoder launch CONFIG --dry-run` shows the plan"
            )
    return lines

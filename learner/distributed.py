"""Process group, device and FSDP2 wrapping of the policy.

The learner group is W processes (Ray actors later, torchrun or mp.spawn in tests). Each calls
`init_distributed()`, which reads the standard env (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK) the way torchrun sets it, so a Ray actor only has to set those five variables. With
none set it starts a one-process group on a free local port. Backend by device
(`process_group_backend`): gloo on CPU; on CUDA, NCCL for CUDA tensors and gloo for CPU ones.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors import safe_open
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from microcoder.device import resolve_device
from microcoder.learner.checkpoint_names import sources, to_checkpoint_names
from microcoder.learner.config import LoraConfig
from microcoder.learner.converted_rows import converted_rows
from microcoder.learner.lora import adapters
from microcoder.learner.mesh import build_mesh, shard_rows
from microcoder.learner.models.config_overrides import model_config
from microcoder.learner.offload import check_params_on_host, fully_shard_kwargs, to_mesh_device


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (for single-process groups and tests)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def pick_device(requested: str = "auto") -> torch.device:
    """cuda:LOCAL_RANK when asked (or auto and a GPU is visible), else cpu; the choice itself is
    microcoder.device.resolve_device, the one rule every actor follows."""

    if resolve_device(requested) == "cpu":
        return torch.device("cpu")
    index = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def set_rank_env(rank: int, world_size: int, master: tuple[str, int]) -> None:
    """The env `init_distributed` joins a group from, for a rank in a Ray actor (one device per
    actor: LOCAL_RANK 0); `master`: rank 0's (address, port)."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK="0",
        MASTER_ADDR=master[0],
        MASTER_PORT=str(master[1]),
    )


def init_distributed(device: torch.device, timeout_s: float = 600.0) -> tuple[int, int]:
    """Join (or create) the default process group; returns (rank, world_size).

    With RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in the env (torchrun, or set by a Ray actor),
    joins that group. With no WORLD_SIZE, starts a one-process group on a free local port
    without touching the env (so child processes do not inherit a fake rendezvous).
    `timeout_s` (learner.collective_timeout_s in a run) bounds the rendezvous and, afterwards,
    every collective of the group: a rank that never joins or never arrives at a collective
    makes the others fail after it (`named_collective` says what to do), never hang.
    """
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    backend = process_group_backend(device.type)
    kwargs = dict(
        timeout=timedelta(seconds=timeout_s), device_id=device if device.type == "cuda" else None
    )
    if "WORLD_SIZE" in os.environ:
        missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing:
            raise RuntimeError(
                f"WORLD_SIZE is set but {', '.join(missing)} is not; set all four on every rank"
            )
        try:
            dist.init_process_group(backend, init_method="env://", **kwargs)
        except RuntimeError as err:  # DistStoreError / DistNetworkError: a rank did not join
            env = os.environ
            raise RuntimeError(
                f"learner rank {env['RANK']} of {env['WORLD_SIZE']}: the process group at "
                f"{env['MASTER_ADDR']}:{env['MASTER_PORT']} did not form within {timeout_s:.0f} s: "
                "a rank did not join (it died or hangs before setup: see the other ranks' logs); "
                f"raise learner.collective_timeout_s if ranks start this slowly ({err})"
            ) from err
    else:
        url = f"tcp://127.0.0.1:{free_port()}"
        dist.init_process_group(backend, init_method=url, rank=0, world_size=1, **kwargs)
    return dist.get_rank(), dist.get_world_size()


def process_group_backend(device_type: str) -> str:
    """The learner group's backend for a learner computing on `device_type`: "gloo" on CPU;
    "cpu:gloo,cuda:nccl" on CUDA, so each collective goes to the backend of its tensors' device.

    The learner's own collectives (FSDP2's, the step's stats, the intake broadcast, the weight
    gather) all take tensors on the compute device, which NCCL serves; the CPU half is for the
    collectives torch makes on host tensors (checkpointing's object collectives, a CPU tensor a
    future change might pass), which an NCCL-only group would refuse at the first step.
    """
    if device_type == "cuda":
        return "cpu:gloo,cuda:nccl"
    if device_type == "cpu":
        return "gloo"
    raise ValueError(
        f"the learner runs on cpu or cuda, not {device_type}; set device to auto, cpu or cuda"
    )


@contextmanager
def named_collective(what: str, timeout_s: float) -> Iterator[None]:
    """Run collectives of `what` (train, publish, save); a collective that timed out waiting for
    another rank fails with what to do instead of gloo's or NCCL's bare "Timed out" line."""
    try:
        yield
    except RuntimeError as err:
        text = str(err)
        if "timed out" not in text.lower() and "timeout" not in text.lower():
            raise
        rank = dist.get_rank() if dist.is_initialized() else 0
        raise RuntimeError(
            f"learner rank {rank}: a collective of {what} waited more than {timeout_s:.0f} s "
            "for another rank (stuck or dead: the driver names the ranks that did not finish); "
            f"raise learner.collective_timeout_s if one collective is this slow ({text[:300]})"
        ) from err


def close_distributed() -> None:
    """Leave the process group cleanly: wait for every rank, then destroy the group.

    Call it before a rank's process exits. A gloo group left to the interpreter's exit can abort
    the process ("terminate called without an active exception", SIGABRT) when its threads are
    torn down while a peer still talks to them; the barrier makes every rank finish its last
    collective first.
    """
    if not dist.is_initialized():
        return
    if dist.get_world_size() > 1:
        dist.barrier()
    dist.destroy_process_group()


def resolve_dtype(requested: str, device: torch.device) -> torch.dtype:
    """Compute dtype: auto = float32 on CPU, bfloat16 on CUDA."""
    if requested == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[requested]


def load_sharded_policy(
    path: str | Path,
    device: torch.device,
    compute_dtype: torch.dtype,
    attn: str,
    replicas: int = 1,
    train: bool = True,
    activation_checkpointing: bool = False,
    offload: str = "none",
    config_overrides: dict | None = None,
    lora: LoraConfig | None = None,
    seed: int = 0,
) -> torch.nn.Module:
    """Build a HF causal LM on the meta device, apply FSDP2 (each decoder layer, then the root),
    then fill each rank's shards from the checkpoint: no rank ever holds a full copy.

    Steps: the model from its config on `torch.device("meta")` (no memory, no init compute);
    `fully_shard` on each decoder layer (found through `_no_split_modules`: Qwen2DecoderLayer,
    ...) and the root, over the learner's mesh (learner/mesh.py: HSDP, `replicas` replicas ×
    world / `replicas` shards, when `replicas` > 1); `to_empty(device)` allocates only this
    rank's shards; non-persistent buffers (rotary `inv_freq`), which no checkpoint holds, are
    recomputed by transformers' own initializer; then `load_sharded_weights` copies this rank's
    rows of every tensor in.
    Master weights are fp32 whatever the checkpoint's dtype; with a bf16 compute dtype, FSDP2
    casts parameters for compute and reduces gradients in fp32. With `activation_checkpointing`
    each decoder layer's activations are recomputed in the backward pass
    (`enable_activation_checkpointing`). `config_overrides` (model.config_overrides) change the
    model's config.json before the model is built (learner/models/config_overrides.py). With
    `offload` = "params" the shards live in host memory (FSDP2's CPU offload: learner/offload.py).
    With `lora` (learner.lora) the adapters are injected before sharding (learner/lora/adapters.py:
    apply_lora): only they train and keep fp32 masters; the frozen base is held in
    `compute_dtype` (`freeze_base_in`), loaded from the checkpoint by its own names, and the
    adapters start from `init_adapters(seed)` (B = 0: the base model's outputs).
    """
    from transformers import AutoModelForCausalLM

    config = model_config(path, config_overrides)
    config.use_cache = False
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(
            config, dtype=torch.float32, attn_implementation=attn
        )
    if lora is not None:
        adapters.apply_lora(model, lora)
        freeze_base_in(model, compute_dtype)
    model.train(train)
    if activation_checkpointing:
        enable_activation_checkpointing(model)
    mesh = build_mesh(dist.get_world_size(), replicas, device.type)
    mp = None
    if compute_dtype != torch.float32:
        mp = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    layer_names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in layer_names]
    if not layers:
        raise RuntimeError(
            f"{type(model).__name__} declares no _no_split_modules; cannot find decoder layers to shard"
        )
    kwargs = {"mesh": mesh} if mp is None else {"mesh": mesh, "mp_policy": mp}
    kwargs |= fully_shard_kwargs(offload, device)
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    model.to_empty(device=device)  # buffers on the device; offloaded shards stay on the host
    if offload == "params":
        check_params_on_host(model)
    init_non_persistent_buffers(model)
    load_sharded_weights(model, path)
    if lora is not None:
        adapters.init_adapters(model, seed)
    if not train:
        model.requires_grad_(False)
    return model


def freeze_base_in(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Hold every frozen parameter (the base under LoRA) in `dtype`: it needs no fp32 master,
    and FSDP2 requires a uniform dtype only of the trainable ones. In place, so tied weights
    stay one parameter; on the meta device this costs nothing."""
    for param in model.parameters():
        if not param.requires_grad:
            param.data = param.data.to(dtype)


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Recompute each decoder layer's activations in the backward pass instead of keeping them.

    transformers' own switch: every `GradientCheckpointingLayer` (the decoder layers) wraps its
    whole call, FSDP2's unshard hooks included, in non-reentrant `torch.utils.checkpoint`. It is a
    flag on the layers, so it works before or after `fully_shard`; the recompute runs inside
    FSDP2's pre-backward unshard, so it all-gathers nothing extra. Same loss and gradients, less
    activation memory (one layer's activations instead of all of them), about one more forward.
    """
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def init_non_persistent_buffers(model: torch.nn.Module) -> None:
    """Recompute the buffers no checkpoint holds (rotary `inv_freq`, `original_inv_freq`) after
    `to_empty` left them uninitialised, with transformers' initializer for the owning module
    (what `from_pretrained` itself does for them). Parameters it touches are loaded afterwards."""
    with torch.no_grad():
        for module in model.modules():
            if module._non_persistent_buffers_set:
                model._init_weights(module)


def _checkpoint_files(path: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it, for a single or an indexed checkpoint."""

    index = path / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: path / file for name, file in weight_map.items()}

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path} holds no *.safetensors; save the model with safetensors")
    out = {}
    for file in files:
        with safe_open(file, framework="pt") as f:
            out |= {name: file for name in f.keys()}
    return out


def _local_rows(tensor: torch.Tensor) -> slice:
    """Rows (dim 0) of the full tensor that this rank's shard holds (learner/mesh.py
    `shard_rows`: FSDP2's Shard(0) splits them like `torch.chunk`; under HSDP by the shard dim's
    coordinate, the same rows on every replica)."""

    if not isinstance(tensor, DTensor):
        return slice(None)
    mesh = tensor.device_mesh
    return shard_rows(tensor.shape[0], mesh.shape, mesh.get_coordinate(), tensor.placements)


def load_sharded_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Copy this rank's rows of every parameter and persistent buffer from the checkpoint at
    `path` (safetensors, single or indexed) into `model`, reading only those rows from disk.

    No collective and no full tensor in memory, not even on rank 0: every rank reads its own
    slices (safetensors `get_slice`), which needs the checkpoint on every node (as loading did
    before). Tied weights (lm_head = embed_tokens) are one parameter, filled from whichever of
    its names the checkpoint holds. A parameter the checkpoint holds under other names (MoE's
    fused experts) is built from them by transformers' own conversion
    (learner/checkpoint_names.py), one parameter at a time, each rank reading only the sources
    of its own rows (learner/converted_rows.py); a missing tensor is an error.
    """

    path = Path(path)
    files = _checkpoint_files(path)
    names: dict[int, list[str]] = {}
    tensors: dict[int, torch.Tensor] = {}
    persistent = set(model.state_dict().keys())
    for name, t in [*model.named_parameters(remove_duplicate=False), *model.named_buffers()]:
        if name in persistent and not adapters.is_adapter(
            name
        ):  # adapters: init_adapters fills them
            names.setdefault(id(t), []).append(adapters.checkpoint_name(name))
            tensors[id(t)] = t
    by_file: dict[Path, list[tuple[str, torch.Tensor]]] = {}
    converted = sources(model, files)
    with torch.no_grad():
        for key, aliases in names.items():
            found = next((n for n in aliases if n in files), None)
            if found is not None:
                by_file.setdefault(files[found], []).append((found, tensors[key]))
                continue
            alias = next((n for n in aliases if n in converted), None)
            if alias is None:
                raise KeyError(
                    f"{path} has no tensor {' or '.join(aliases)}, nor tensors transformers "
                    f"converts to it; the checkpoint does not match {type(model).__name__} "
                    "(does config.json belong to these weights?)"
                )
            _load_converted(model, tensors[key], alias, converted[alias], files)
        for file, items in by_file.items():
            with safe_open(file, framework="pt") as f:
                for name, t in items:
                    rows = _local_rows(t)
                    local = t.to_local() if hasattr(t, "to_local") else t
                    part = f.get_tensor(name) if rows == slice(None) else f.get_slice(name)[rows]
                    _copy_rows(name, part, local, "checkpoint")


def _load_converted(
    model: torch.nn.Module, t: torch.Tensor, name: str, keys: list[str], files: dict[str, Path]
) -> None:
    """Fill this rank's rows of parameter `name` from the checkpoint tensors `keys` it is
    converted from (transformers' conversion: learner/checkpoint_names.py), reading only the
    sources of those rows (a rank's experts: learner/converted_rows.py)."""

    local = t.to_local() if hasattr(t, "to_local") else t
    if local.shape[0] == 0:  # more ranks than rows: this rank keeps none
        return
    part = converted_rows(model, name, keys, files, _local_rows(t), t.shape[0])
    _copy_rows(name, part, local, "converted checkpoint")


def _copy_rows(name: str, part: torch.Tensor, local: torch.Tensor, what: str) -> None:
    """Copy `what`'s rows of parameter `name` into this rank's shard, refusing a shape that does
    not fit (a config.json that does not match the weights)."""
    if tuple(part.shape) != tuple(local.shape):
        raise ValueError(
            f"{name}: {what} rows {tuple(part.shape)} do not fit this rank's "
            f"shard {tuple(local.shape)} (does config.json match the weights?)"
        )
    local.copy_(part)


def full_state_dict(
    model: torch.nn.Module, dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """Collective: the full (unsharded) state dict on CPU on rank 0 ({} elsewhere), floating
    tensors in `dtype` (None: as stored, i.e. the fp32 master weights).

    One tensor at a time: each is all-gathered on the compute device, cast there, and only
    rank 0 copies it to the host. So rank 0 builds a single host copy, already in `dtype` (no
    fp32 copy first), and the device holds one unsharded tensor at a time. Tied weights (one
    parameter under two names) are gathered once; both names share the host tensor. The names
    and shapes are the checkpoint's (MoE experts unfused, learner/checkpoint_names.py): what
    vLLM's reload and `from_pretrained` read. Under LoRA: the frozen base alone, under its
    checkpoint names (learner/lora/adapters.py: adapter_state_dict gives the adapters).
    """

    rank0 = dist.get_rank() == 0
    out: dict[str, torch.Tensor] = {}
    first: dict[int, str] = {}
    with torch.no_grad():
        for name, t in model.state_dict(keep_vars=True).items():
            if id(t) in first:
                if rank0:
                    out[name] = out[first[id(t)]]
                continue
            first[id(t)] = name
            full = to_mesh_device(t).full_tensor() if isinstance(t, DTensor) else t.detach()
            if dtype is not None and full.is_floating_point():
                full = full.to(dtype)
            if rank0:
                out[name] = full.to("cpu", copy=True)
            del full
    if adapters.has_adapters(model):
        out = adapters.base_state_dict(out)
    return to_checkpoint_names(model, out) if rank0 else out

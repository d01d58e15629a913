"""Process group, device and FSDP2 wrapping of the policy.

The learner group is W processes (Ray actors later, torchrun or mp.spawn in tests). Each calls
`init_distributed()`, which reads the standard env (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK) the way torchrun sets it, so a Ray actor only has to set those five variables. With
none set it starts a one-process group on a free local port. Backend by device: NCCL on CUDA,
gloo on CPU.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (for single-process groups and tests)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def pick_device(requested: str = "auto") -> torch.device:
    """cuda:LOCAL_RANK when asked (or auto and a GPU is visible), else cpu; the choice itself is
    microcoder.device.resolve_device, the one rule every actor follows."""
    from microcoder.device import resolve_device

    if resolve_device(requested) == "cpu":
        return torch.device("cpu")
    index = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def init_distributed(device: torch.device, timeout_s: float = 600.0) -> tuple[int, int]:
    """Join (or create) the default process group; returns (rank, world_size).

    With RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in the env (torchrun, or set by a Ray actor),
    joins that group. With no WORLD_SIZE, starts a one-process group on a free local port
    without touching the env (so child processes do not inherit a fake rendezvous).
    """
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    backend = "nccl" if device.type == "cuda" else "gloo"
    kwargs = dict(
        timeout=timedelta(seconds=timeout_s), device_id=device if device.type == "cuda" else None
    )
    if "WORLD_SIZE" in os.environ:
        missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing:
            raise RuntimeError(
                f"WORLD_SIZE is set but {', '.join(missing)} is not; set all four on every rank"
            )
        dist.init_process_group(backend, init_method="env://", **kwargs)
    else:
        url = f"tcp://127.0.0.1:{free_port()}"
        dist.init_process_group(backend, init_method=url, rank=0, world_size=1, **kwargs)
    return dist.get_rank(), dist.get_world_size()


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
    train: bool = True,
) -> torch.nn.Module:
    """Load a HF causal LM (fp32 master weights) and apply FSDP2: each decoder layer, then the root.

    Decoder layers are found through the model's `_no_split_modules` (Qwen2DecoderLayer, ...).
    With a bf16 compute dtype, FSDP2 casts parameters for compute and reduces gradients in fp32.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation=attn
    )
    model.config.use_cache = False
    model.to(device)
    model.train(train)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
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
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    if not train:
        model.requires_grad_(False)
    return model


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Collective: the full (unsharded) state dict on CPU, on rank 0 only ({} elsewhere)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=opts)

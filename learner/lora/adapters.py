"""LoRA adapters (`learner.lora`): injected with peft into the policy, the base frozen.

`apply_lora(model, cfg)` injects peft LoRA layers into the Hugging Face model in place
(`peft.inject_adapter_in_model`, adapter name "default") and freezes every other parameter, so
the model keeps its class (the forward, the decoder layers FSDP2 shards, `config`) and only the
adapters have `requires_grad`. learner/distributed.py calls it on the meta-device model before
`fully_shard`, casts the frozen base to the compute dtype, loads the base weights by their
checkpoint names (`checkpoint_name`: ".base_layer" dropped) and fills the adapters with
`init_adapters` (A: kaiming-uniform as peft, from a seeded generator so every rank draws the
same full tensor; B: zeros, so step 0's policy is the base model).

Names. In the training model an adapter is `model.layers.0.self_attn.q_proj.lora_A.default.weight`
and the base weight it adapts `model.layers.0.self_attn.q_proj.base_layer.weight`. PEFT saves
the adapter as `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight` (what
`peft.get_peft_model_state_dict` gives and an adapter_model.safetensors holds): `peft_name`.

The adapter folder (`write_adapter_folder`): adapter_model.safetensors + adapter_config.json
(`adapter_config`), what `peft.PeftModel.from_pretrained` and vLLM's LoRA loader read.
`merged_state_dict` folds an adapter into the base weights, W + (alpha / r) · B @ A.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch.distributed.tensor import DTensor

from microcoder.learner.config import LoraConfig
from microcoder.learner.mesh import shard_rows
from microcoder.learner.offload import to_mesh_device

ADAPTER = "default"
"""peft's adapter name inside the training model."""

PEFT_PREFIX = "base_model.model."
"""What PEFT prefixes a model's parameter names with in a saved adapter."""


def apply_lora(model: torch.nn.Module, cfg: LoraConfig) -> torch.nn.Module:
    """Inject LoRA adapters on `cfg.targets` of every decoder layer into `model` (in place;
    returned) and freeze everything else. Works on a meta-device model (the adapters are then
    meta too: `init_adapters` fills them after `to_empty`)."""
    import peft

    peft.inject_adapter_in_model(peft_config(cfg), model, adapter_name=ADAPTER)
    for name, param in model.named_parameters():
        param.requires_grad_(is_adapter(name))
    if not has_adapters(model):
        raise ValueError(
            f"learner.lora.targets = {list(cfg.targets)} matched no module of "
            f"{type(model).__name__}; name its linear layers (e.g. q_proj, v_proj)"
        )
    return model


def peft_config(cfg: LoraConfig, **extra):
    """peft's LoraConfig of `cfg` (targets sorted), with `extra` fields."""
    import peft

    return peft.LoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        target_modules=sorted(cfg.targets),
        lora_dropout=cfg.dropout,
        bias="none",
        **extra,
    )


def is_adapter(name: str) -> bool:
    """Whether parameter `name` of the training model is a LoRA adapter matrix."""
    return f".lora_A.{ADAPTER}." in name or f".lora_B.{ADAPTER}." in name


def has_adapters(model: torch.nn.Module) -> bool:
    """Whether `model` carries LoRA adapters (`apply_lora`)."""
    return any(is_adapter(n) for n, _ in model.named_parameters())


def checkpoint_name(name: str) -> str:
    """The base checkpoint's name of a training-model tensor: an adapted layer's
    `x.base_layer.weight` is the checkpoint's `x.weight`; other names are unchanged."""
    return name.replace(".base_layer.", ".")


def peft_name(name: str) -> str:
    """PEFT's saved name of adapter `name` of the training model (module docstring)."""
    return PEFT_PREFIX + name.replace(f".{ADAPTER}.", ".")


def init_adapters(model: torch.nn.Module, seed: int = 0) -> None:
    """Fill every adapter after `to_empty`: lora_A kaiming-uniform (a = sqrt(5), peft's and
    nn.Linear's init) drawn in full from a generator seeded by `seed` and the parameter's
    index, so every rank holds rows of the same tensor; lora_B zeros. Sharded (DTensor)
    adapters get this rank's rows."""
    with torch.no_grad():
        for index, (name, param) in enumerate(model.named_parameters()):
            if not is_adapter(name):
                continue
            full = torch.zeros(param.shape, dtype=torch.float32)
            if ".lora_A." in name:
                gen = torch.Generator().manual_seed(seed * 1_000_003 + index)
                bound = 1.0 / math.sqrt(param.shape[1])  # kaiming_uniform_(a=sqrt(5))
                full.uniform_(-bound, bound, generator=gen)
            if isinstance(param, DTensor):
                local = param.to_local()
                rows = _shard_rows(param)
                local.copy_(full[rows])
            else:
                param.copy_(full)


def _shard_rows(param: DTensor) -> slice:
    """This rank's rows of sharded `param` (learner/mesh.py shard_rows)."""
    mesh = param.device_mesh
    return shard_rows(param.shape[0], mesh.shape, mesh.get_coordinate(), param.placements)


def adapter_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Collective: the full (unsharded) adapter tensors in fp32 on CPU, under PEFT's saved
    names, on rank 0 ({} on the other ranks). One tensor gathered at a time, as
    learner/distributed.py full_state_dict does."""
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not is_adapter(name):
                continue
            full = to_mesh_device(param).full_tensor() if isinstance(param, DTensor) else param
            if rank0:
                out[peft_name(name)] = full.detach().to("cpu", torch.float32, copy=True)
            del full
    return out


def adapter_config(cfg: LoraConfig, base_model_name_or_path: str) -> dict:
    """adapter_config.json's content for an adapter of `cfg` on the model at
    `base_model_name_or_path`: peft's own LoraConfig serialised (what PEFT and vLLM read)."""
    config = peft_config(
        cfg, task_type="CAUSAL_LM", base_model_name_or_path=str(base_model_name_or_path)
    )
    out = config.to_dict()
    return json.loads(json.dumps(out, default=_jsonable))


def _jsonable(value):
    """Sets (target_modules) as sorted lists, enums as their value."""
    if isinstance(value, set):
        return sorted(value)
    return str(value)


def write_adapter_folder(state: dict[str, torch.Tensor], config: dict, path: str | Path) -> Path:
    """Write adapter_model.safetensors (`state`, PEFT names) and adapter_config.json (`config`)
    into the folder `path` (created if needed); returns it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.contiguous() for k, v in state.items()}
    save_file(tensors, path / "adapter_model.safetensors", metadata={"format": "pt"})
    (path / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    return path


def base_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A training model's full state dict without its adapters, under the base checkpoint's
    names (`checkpoint_name`)."""
    return {checkpoint_name(k): v for k, v in state.items() if not is_adapter(k)}


def merged_state_dict(
    base: dict[str, torch.Tensor], adapter: dict[str, torch.Tensor], cfg: LoraConfig
) -> dict[str, torch.Tensor]:
    """The base weights (checkpoint names) with `adapter` (PEFT names) folded in (`merge_into`);
    `base` is not modified."""
    out = dict(base)
    merge_into(out, adapter, cfg)
    return out


def merge_into(
    weights: dict[str, torch.Tensor], adapter: dict[str, torch.Tensor], cfg: LoraConfig
) -> None:
    """Fold `adapter` (PEFT names) into `weights` (checkpoint names; {} on a rank other than 0:
    nothing to do): W' = W + (alpha / rank) · B @ A per adapted layer, computed in fp32 and
    stored in W's dtype, replacing the entry (the tensor it held is not modified)."""
    scale = cfg.alpha / cfg.rank
    for key, a in adapter.items():
        if ".lora_A." not in key:
            continue
        b = adapter[key.replace(".lora_A.", ".lora_B.")]
        target = key[len(PEFT_PREFIX) :].replace(".lora_A.weight", ".weight")
        if target not in weights:
            raise KeyError(f"adapter {key} adapts {target}, which the base weights do not hold")
        w = weights[target]
        weights[target] = torch.addmm(w.float(), b.float(), a.float(), alpha=scale).to(w.dtype)

"""Checkpoint names <-> the model's parameter names, by transformers' own conversion mapping.

transformers 5 builds some families with parameters that no checkpoint holds under that name:
MoE models (qwen3_moe, qwen2_moe, mixtral, ...) fuse every expert's gate/up/down projections
into one `mlp.experts.gate_up_proj` / `mlp.experts.down_proj` tensor, and convert the
checkpoint's per-expert tensors (`mlp.experts.{e}.gate_proj.weight`, ...) on load
(transformers/conversion_mapping.py, core_model_loading.py: WeightConverter). The learner loads
shards itself (learner/distributed.py: load_sharded_weights) and publishes/saves a state dict
itself, so it uses the same conversion as a library call, both ways:

- `sources(model, keys)`: which checkpoint tensors feed each converted parameter;
- `to_model_names(model, tensors)`: checkpoint tensors -> the model's (fused) parameters;
- `to_checkpoint_names(model, state)`: the model's state dict -> checkpoint names and shapes,
  what vLLM's `reload_weights(..., is_checkpoint_format=True)` and `from_pretrained` read.

A model without a conversion mapping (qwen2, llama, ...) passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy

import torch


def _transforms(model: torch.nn.Module) -> tuple[list, list]:
    """(renamings, converters) of transformers' conversion mapping for `model` (both [] if none)."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import PrefixChange, WeightConverter, WeightRenaming

    found = get_model_conversion_mapping(model, add_legacy=False) or []
    found = [t for t in found if not isinstance(t, PrefixChange)]
    renamings = [t for t in found if isinstance(t, WeightRenaming)]
    converters = [t for t in found if isinstance(t, WeightConverter)]
    return renamings, converters


def _natural(key: str) -> list:
    """Sort key: dotted parts, numbers as numbers (expert 10 after expert 9)."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split(".")]


def sources(model: torch.nn.Module, keys: Iterable[str]) -> dict[str, list[str]]:
    """Model parameter name -> the checkpoint keys it is converted from, in checkpoint order,
    for every checkpoint key the mapping renames or converts (keys kept as they are: absent)."""
    from transformers.core_model_loading import rename_source_key

    renamings, converters = _transforms(model)
    out: dict[str, list[str]] = {}
    if not renamings and not converters:
        return out
    for key in sorted(keys, key=_natural):
        target, _ = rename_source_key(key, renamings, converters)
        if target != key:
            out.setdefault(target, []).append(key)
    return out


def to_model_names(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Checkpoint tensors (all the sources of the parameters wanted) -> the model's parameters,
    converted as `from_pretrained` converts them (experts stacked and concatenated)."""
    from transformers.core_model_loading import WeightRenaming, rename_source_key

    renamings, converters = _transforms(model)
    by_pattern = {p: c for c in converters for p in c.source_patterns}
    pending: dict[str, object] = {}
    for key in sorted(tensors, key=_natural):
        target, pattern = rename_source_key(key, renamings, converters)
        if pattern is None:
            op = pending.setdefault(target, WeightRenaming(key, target))
            pattern = key
        else:
            op = pending.setdefault(target, deepcopy(by_pattern[pattern]))
        op.add_tensor(target, key, pattern, tensors[key])
    out = {}
    for target, op in pending.items():
        for name, value in op.convert(target, model=model, config=model.config).items():
            out[name] = value[0] if isinstance(value, list) else value
    return out


def to_checkpoint_names(
    model: torch.nn.Module, state: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The model's state dict in checkpoint names and shapes (transformers' own reverse
    conversion, what `save_pretrained` writes); unchanged for a model with no mapping."""
    from transformers.core_model_loading import revert_weight_conversion

    if not any(_transforms(model)):
        return state
    return revert_weight_conversion(model, state)

"""This rank's rows of a converted parameter, read from only the checkpoint tensors they come from.

A fused MoE parameter (`mlp.experts.gate_up_proj` [experts, 2 * I, H], `mlp.experts.down_proj`
[experts, H, I]) is built by transformers' conversion from one group of checkpoint tensors per
expert (`mlp.experts.{e}.gate_proj.weight`, ...), stacked along dim 0
(learner/checkpoint_names.py). FSDP2 shards that dim 0, so a rank keeping experts [a, b) needs
only the source tensors of experts a..b-1: `converted_rows` reads those, converts them with the
same library conversion (which stacks and concatenates whatever list it is given), and returns
exactly the rank's rows. The rule is general: any converted parameter whose sources differ by one
integer field of their names (`stacking_index`) that runs 0..dim0-1 is read this way.

Anything else (a conversion that is not a stack along dim 0) falls back to reading every source
whole and slicing the converted tensor, as before; no supported family needs it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open

from microcoder.learner.checkpoint_names import to_model_names


def stacking_index(keys: list[str], rows: int) -> int | None:
    """Position of the dotted field of `keys` that numbers the stacked items (the expert index),
    when exactly one integer field differs among the keys (other differing fields are names:
    gate_proj / up_proj, concatenated per item), its values are 0..rows-1 and each value names
    the same number of keys; None otherwise (not a stack along dim 0)."""
    parts = [k.split(".") for k in keys]
    if not parts or len({len(p) for p in parts}) != 1:
        return None
    varying = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
    numbers = [i for i in varying if all(p[i].isdigit() for p in parts)]
    names = [i for i in varying if not any(p[i].isdigit() for p in parts)]
    if len(numbers) != 1 or len(numbers) + len(names) != len(varying):
        return None
    (pos,) = numbers
    counts: dict[int, int] = {}
    for p in parts:
        counts[int(p[pos])] = counts.get(int(p[pos]), 0) + 1
    if sorted(counts) != list(range(rows)) or len(set(counts.values())) != 1:
        return None
    return pos


def keys_for_rows(keys: list[str], rows: slice, total: int) -> list[str]:
    """The source keys feeding rows `rows` of a converted parameter with `total` rows: those of
    the stacked items in that range when the sources stack along dim 0, else all of them."""
    pos = stacking_index(keys, total)
    if pos is None:
        return list(keys)
    start, stop, _ = rows.indices(total)
    return [k for k in keys if start <= int(k.split(".")[pos]) < stop]


def converted_rows(
    model: torch.nn.Module,
    name: str,
    keys: list[str],
    files: dict[str, Path],
    rows: slice,
    total: int,
) -> torch.Tensor:
    """Rows `rows` of parameter `name` (`total` rows in full), converted from the checkpoint
    tensors `keys` (all its sources), reading only the sources those rows come from."""

    wanted = keys_for_rows(keys, rows, total)
    parts = {}
    for key in wanted:
        with safe_open(files[key], framework="pt") as f:
            parts[key] = f.get_tensor(key)
    converted = to_model_names(model, parts)[name]
    if len(wanted) == len(keys):
        return converted[rows]
    return converted

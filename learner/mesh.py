"""The learner's device mesh (plain FSDP or HSDP) and which rows of a tensor a rank's shard holds.

`learner.replicas = R` (HSDP): the W ranks form a 2-D mesh of R replicas × (W / R) shards, dims
named ("replicate", "shard"), row-major, so a replica is a run of W / R consecutive ranks (the
learner placement puts consecutive ranks on one node: learner_placement.py). `fully_shard` on
that mesh gives FSDP2's HSDP: parameters are `Replicate()` over replicas and `Shard(0)` inside
one. Parameter all-gathers and the gradient reduce-scatter stay inside a replica; one all-reduce
across replicas per gradient sync averages the replicas' shards. R = 1 is plain FSDP on a 1-D
mesh over every rank (as before HSDP existed, so its checkpoints and behaviour are unchanged).

`shard_rows` is pure (no process group): the checkpoint loader (learner/distributed.py
`_local_rows`) gives it a DTensor's mesh shape, this rank's coordinate and the placements.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard


def build_mesh(world: int, replicas: int, device_type: str):
    """The learner's DeviceMesh over `world` ranks: 1-D ("shard",) for `replicas` = 1, else 2-D
    ("replicate", "shard") of shape (replicas, world // replicas). Collective (every rank calls
    it, in the same order as the other groups it creates)."""

    check_replicas(world, replicas)
    if replicas == 1:
        return init_device_mesh(device_type, (world,), mesh_dim_names=("shard",))
    return init_device_mesh(
        device_type, (replicas, world // replicas), mesh_dim_names=("replicate", "shard")
    )


def check_replicas(world: int, replicas: int) -> None:
    """Refuse an HSDP shape the ranks cannot form (the config checks world_size; this checks the
    group the ranks actually joined)."""
    if replicas < 1 or world % replicas:
        raise ValueError(
            f"learner.replicas = {replicas} does not divide the learner group's {world} ranks; "
            "HSDP needs R replicas of world / R ranks each: set learner.replicas to a divisor "
            "of learner.world_size (1 = plain FSDP)"
        )


def shard_rows(
    n: int, mesh_shape: Sequence[int], coordinate: Sequence[int], placements: Sequence
) -> slice:
    """Rows (dim 0) of an `n`-row tensor held by the rank at `coordinate` of a mesh of
    `mesh_shape`, placed by `placements` (one per mesh dim): `Replicate()` keeps every row,
    `Shard(0)` splits the rows left on that dim the way `torch.chunk` does (ceil(rows / size)
    each, the last coordinates possibly fewer or none), mesh dims taken left to right as
    DTensor does. HSDP's (Replicate(), Shard(0)) thus gives the rows of the shard-dim
    coordinate, the same on every replica."""

    if not len(mesh_shape) == len(coordinate) == len(placements):
        raise ValueError(
            f"mesh shape {tuple(mesh_shape)}, coordinate {tuple(coordinate)} and placements "
            f"{tuple(placements)} must have one entry per mesh dim"
        )
    start = 0
    stop = n
    for size, coord, placement in zip(mesh_shape, coordinate, placements, strict=True):
        if isinstance(placement, Replicate):
            continue
        if placement != Shard(0):
            raise NotImplementedError(
                f"the sharded loader reads Shard(0) or Replicate() placements, not {placement} "
                f"(placements {tuple(placements)}); shard parameters with fully_shard's default"
            )
        per = -(-(stop - start) // size)
        start, stop = min(start + coord * per, stop), min(start + (coord + 1) * per, stop)
    return slice(start, stop)


def local_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes this rank holds of `tensors` (a DTensor counts its local shard only)."""
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total

"""Where the learner ranks go: packed on as few nodes as possible.

FSDP2 all-gathers every layer's parameters and reduce-scatters every layer's gradients on every
micro-batch, so a rank on another node turns NVLink traffic into network traffic. The ranks
therefore share placement groups instead of one group each (which let Ray scatter them):

- all ranks fit one node (`world_size × gpus_per_rank ≤` a node's GPUs, or the node size is not
  known): ONE group, one bundle per rank, `STRICT_PACK` (every bundle on one node, or the group
  waits and its creation fails naming the fix);
- more ranks than one node holds: one `STRICT_PACK` group per node, each a run of consecutive
  ranks filling a node (ranks 0-7 on one node, 8-15 on the next, ...). Not one `PACK` group:
  PACK is best effort, and on a fragmented cluster it would quietly spread the ranks over more
  nodes than needed; a STRICT_PACK group per node either gets a whole node's worth of GPUs for
  its ranks or says so. Consecutive ranks on one node keep FSDP2's ring neighbours on NVLink.

On CPU devices the ranks get no group (Ray's logical CPUs suffice, as for every pool); the
options then carry only the section's custom resources. `plan_learner_groups` is pure (what the
tests check); `learner_rank_options` creates the groups in `placement.GROUPS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from microcoder.launch.run.placement import GROUPS


@dataclass(frozen=True)
class RankGroup:
    """One placement group of learner ranks."""

    name: str
    """Its replica name in `placement.GROUPS` (the Ray group is `mc-<name>`)."""
    ranks: tuple[int, ...]
    """The ranks it holds; bundle i is rank `ranks[i]`'s."""
    bundle: dict[str, float] = field(default_factory=dict)
    """Each rank's bundle: its CPUs, GPUs and custom resources."""
    strategy: str = "STRICT_PACK"
    """Ray's placement strategy: STRICT_PACK = every bundle on one node."""


def plan_learner_groups(
    world_size: int,
    cpus_per_rank: float,
    gpus_per_rank: float,
    resources: dict[str, float] | None = None,
    gpus_per_node: float | None = None,
) -> list[RankGroup]:
    """The learner's placement groups (see the module docstring). `gpus_per_node`: GPUs of one
    node of the cluster (None = unknown: one group for all ranks)."""
    bundle = {k: v for k, v in (("CPU", cpus_per_rank), ("GPU", gpus_per_rank)) if v}
    bundle.update(resources or {})
    per_node = world_size
    if gpus_per_node and gpus_per_rank and world_size * gpus_per_rank > gpus_per_node + 1e-9:
        per_node = max(1, math.floor(gpus_per_node / gpus_per_rank + 1e-9))
    if per_node >= world_size:
        return [RankGroup("learner", tuple(range(world_size)), bundle)]
    return [
        RankGroup(
            f"learner-node{i}", tuple(range(start, min(start + per_node, world_size))), bundle
        )
        for i, start in enumerate(range(0, world_size, per_node))
    ]


def gpus_per_node() -> float | None:
    """The GPUs of the smallest GPU node of the running Ray cluster (None: no GPU node), so
    that a per-node group fits every GPU node."""
    import ray

    counts = [
        float(n["Resources"].get("GPU", 0.0))
        for n in ray.nodes()
        if n.get("Alive") and n["Resources"].get("GPU", 0.0) > 0
    ]
    return min(counts) if counts else None


def learner_rank_options(
    world_size: int,
    cpus_per_rank: float,
    gpus_per_rank: float,
    device: str,
    resources: dict[str, float] | None = None,
) -> tuple[list[dict], list[str]]:
    """Ray `.options()` for each rank, and the names of the groups made for them (to release).
    On CUDA with GPUs the groups of `plan_learner_groups` are created (and waited for) in
    `placement.GROUPS`; otherwise no group, only the custom `resources`."""
    if not (device == "cuda" and gpus_per_rank):
        plain = {"resources": dict(resources)} if resources else {}
        return [dict(plain) for _ in range(world_size)], []
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    groups = plan_learner_groups(
        world_size, cpus_per_rank, gpus_per_rank, resources, gpus_per_node()
    )
    options: list[dict] = [{} for _ in range(world_size)]
    for g in groups:
        pg = GROUPS.create(g.name, [g.bundle] * len(g.ranks), g.strategy)
        for index, rank in enumerate(g.ranks):
            options[rank] = {
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=index
                )
            }
    return options, [g.name for g in groups]

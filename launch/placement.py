"""The placement plan: which pool gets which resources, checked before anything starts.

Pools never share a device: every generator engine and learner rank asks for whole GPUs, each
pool gets its own Ray placement group (bundles packed per pool), so Ray cannot put two of them on
one GPU. On CPU machines the plan only counts CPUs; Ray's CPU counts are logical, so a laptop may
run 3 single-CPU actors on 2 cores (the plan says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from microcoder.launch.config import Config


@dataclass
class PoolPlan:
    name: str
    replicas: int
    cpus_each: float
    gpus_each: float

    @property
    def cpus(self) -> float:
        return self.replicas * self.cpus_each

    @property
    def gpus(self) -> float:
        return self.replicas * self.gpus_each


@dataclass
class Plan:
    device: str
    pools: list[PoolPlan]
    cluster_cpus: float
    cluster_gpus: float
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def cpus(self) -> float:
        return sum(p.cpus for p in self.pools)

    @property
    def gpus(self) -> float:
        return sum(p.gpus for p in self.pools)

    def format(self) -> str:
        lines = [
            f"placement plan (device {self.device}; cluster {self.cluster_cpus:g} CPUs, {self.cluster_gpus:g} GPUs):"
        ]
        lines.append(f"  {'pool':<10} {'replicas':>8} {'CPUs each':>10} {'GPUs each':>10}")
        for p in self.pools:
            lines.append(f"  {p.name:<10} {p.replicas:>8} {p.cpus_each:>10g} {p.gpus_each:>10g}")
        lines.append(f"  {'total':<10} {'':>8} {self.cpus:>10g} {self.gpus:>10g}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  ERROR: {e}" for e in self.errors]
        return "\n".join(lines)


def make_plan(cfg: Config, device: str, cluster_cpus: float, cluster_gpus: float) -> Plan:
    """Resources per pool for `cfg` on a cluster with the given totals; errors say how to fix."""
    g, e, lr = cfg.generator, cfg.executor, cfg.learner
    pools = [
        PoolPlan("buffer", 1, 0.0, 0.0),
        PoolPlan("generator", g.num_engines, g.cpus_per_engine, g.gpus_per_engine),
        PoolPlan("executor", e.num_executors, e.cpus_per_executor, 0.0),
        PoolPlan("learner", lr.world_size, 1.0, lr.gpus_per_rank),
    ]
    plan = Plan(device, pools, cluster_cpus, cluster_gpus)
    if device == "cuda":
        for p, key in (
            (pools[1], "generator.gpus_per_engine"),
            (pools[3], "learner.gpus_per_rank"),
        ):
            if p.gpus_each < 1 or p.gpus_each != int(p.gpus_each):
                plan.errors.append(
                    f"{key} = {p.gpus_each:g}: on GPUs each {p.name} needs a whole number >= 1 of GPUs "
                    "(pools must not share a device); set it to 1 or more"
                )
        if plan.gpus > cluster_gpus:
            plan.errors.append(
                f"the pools need {plan.gpus:g} GPUs but the cluster has {cluster_gpus:g}; lower "
                "generator.num_engines or learner.world_size, or add GPUs"
            )
    else:
        for p, key in (
            (pools[1], "generator.gpus_per_engine"),
            (pools[3], "learner.gpus_per_rank"),
        ):
            if p.gpus_each:
                plan.errors.append(f"{key} = {p.gpus_each:g} but the device is cpu; set it to 0")
    if cfg.generator.num_engines < 1:
        plan.errors.append("generator.num_engines = 0: nothing would generate; set it to 1 or more")
    if cfg.executor.num_executors < 1:
        plan.errors.append("executor.num_executors = 0: nothing would judge; set it to 1 or more")
    if plan.cpus > cluster_cpus:
        if device == "cpu" and cfg.cluster.address == "local":
            plan.notes.append(
                f"the pools reserve {plan.cpus:g} logical CPUs on {cluster_cpus:g} cores: the local "
                "Ray instance advertises that many (they time-share the cores)"
            )
        else:
            plan.errors.append(
                f"the pools need {plan.cpus:g} CPUs but the cluster has {cluster_cpus:g}; lower the "
                "cpus_per_* fields or the replica counts"
            )
    return plan


def replica_options(cpus: float, gpus: float, device: str, name: str) -> dict:
    """Ray `.options()` for one replica. On GPUs each replica gets its own placement group with
    one bundle of whole GPUs, so no two replicas (of any pool) ever share a device; on CPUs plain
    logical CPU reservations suffice (there is no device to share)."""
    if device != "cuda" or not gpus:
        return {}
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = placement_group([{"CPU": cpus, "GPU": gpus}], strategy="STRICT_PACK", name=f"mc-{name}")
    ray.get(pg.ready(), timeout=600)
    return {
        "scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    }

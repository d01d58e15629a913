"""The placement plan (which pool gets which resources, checked before anything starts) and the
placement groups that hold a replica's resources while it lives.

On GPUs every generator engine gets its own Ray placement group, and the learner ranks share
one per node (launch/run/learner_placement.py: packed on as few nodes as possible). Whole GPUs
(1, 2, ...) keep pools apart: Ray never puts two of them on one GPU. A fraction (0 < x < 1)
lets Ray pack replicas onto one GPU, e.g. the learner and a generator on a one-GPU machine at
0.5 each; the plan then checks that it fits and notes what vLLM's memory claim leaves the
learner. On CPU machines the plan only counts CPUs; Ray's CPU counts are logical, so a laptop
may run 3 single-CPU actors on 2 cores (the plan says so), and replicas get no groups.

A pool section's `resources = {NAME = AMOUNT}` (Ray custom resources) pins its replicas to the
nodes that advertise them: each replica asks for them (in its placement group's bundle when it
has one), and the plan checks that the cluster advertises enough of each in all, naming the
sections to change when not. A local run's Ray advertises none, so a pinned pool is an error
there; a `--dry-run` that does not know the cluster's custom resources shows them unchecked.

A placement group lives exactly as long as its replica: `GROUPS` (a `PlacementGroups`) owns
them by replica name; pools call `release(name)` when a replica goes, the eval cluster when it
closes, and a run `release_all()` at its end.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from microcoder.launch.config import Config
from microcoder.resources import RAY_OWN_RESOURCES


@dataclass
class PoolPlan:
    name: str
    replicas: int
    cpus_each: float
    gpus_each: float
    resources_each: dict[str, float] = field(default_factory=dict)
    """Ray custom resources each replica takes (its section's `resources`)."""
    section: str = ""
    """The config section the pool's fields are in ("" for the buffer)."""

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
    cluster_custom: dict[str, float] | None = None
    """Custom resources the cluster advertises in all; None = not known (not checked)."""
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def cpus(self) -> float:
        return sum(p.cpus for p in self.pools)

    @property
    def gpus(self) -> float:
        return sum(p.gpus for p in self.pools)

    def custom_needed(self) -> dict[str, float]:
        """Each custom resource the pools take in all (replicas × amount, summed)."""
        need: dict[str, float] = {}
        for p in self.pools:
            for name, amount in p.resources_each.items():
                need[name] = need.get(name, 0.0) + p.replicas * amount
        return need

    def format(self) -> str:
        cpus = "?" if math.isinf(self.cluster_cpus) else f"{self.cluster_cpus:g}"  # ?: not given
        lines = [
            f"placement plan (device {self.device}; cluster {cpus} CPUs, {self.cluster_gpus:g} GPUs):"
        ]
        custom = any(p.resources_each for p in self.pools)
        head = f"  {'pool':<10} {'replicas':>8} {'CPUs each':>10} {'GPUs each':>10}"
        lines.append(head + ("  custom resources each" if custom else ""))
        for p in self.pools:
            row = f"  {p.name:<10} {p.replicas:>8} {p.cpus_each:>10g} {p.gpus_each:>10g}"
            lines.append(row + (f"  {_fmt(p.resources_each)}" if p.resources_each else ""))
        lines.append(f"  {'total':<10} {'':>8} {self.cpus:>10g} {self.gpus:>10g}")
        if custom:
            need = self.custom_needed()
            if self.cluster_custom is None:
                has = "the cluster's are not known here (not checked)"
            else:
                has = "the cluster has " + _fmt({n: self.cluster_custom.get(n, 0.0) for n in need})
            lines.append(f"  custom resources: the pools take {_fmt(need)}; {has}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  ERROR: {e}" for e in self.errors]
        return "\n".join(lines)


def make_plan(
    cfg: Config,
    device: str,
    cluster_cpus: float,
    cluster_gpus: float,
    cluster_custom: dict[str, float] | None = None,
) -> Plan:
    """Resources per pool for `cfg` on a cluster with the given totals; errors say how to fix.
    `cluster_custom`: the custom resources the cluster advertises (`cluster_resources`); None =
    unknown, except on a local run, whose Ray advertises none."""
    g = cfg.generator
    e = cfg.executor
    lr = cfg.learner
    pools = [
        PoolPlan("buffer", 1, 0.0, 0.0),
        PoolPlan(
            "generator",
            g.num_engines,
            g.cpus_per_engine,
            g.gpus_per_engine,
            g.resources,
            "generator",
        ),
        PoolPlan("executor", e.num_executors, e.cpus_per_executor, 0.0, e.resources, "executor"),
        PoolPlan("learner", lr.world_size, 1.0, lr.gpus_per_rank, lr.resources, "learner"),
    ]
    if cfg.eval.generators:  # set aside for the eval: engines as the training generators'
        pools.append(
            PoolPlan(
                "eval-gen",
                cfg.eval.generators,
                g.cpus_per_engine,
                g.gpus_per_engine,
                g.resources,
                "generator",
            )
        )
    if cluster_custom is None and cfg.cluster.address == "local":
        cluster_custom = {}
    plan = Plan(device, pools, cluster_cpus, cluster_gpus, cluster_custom)
    _check_custom(cfg, plan)
    if device == "cuda":
        _check_gpus(cfg, plan)
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


def cluster_totals(resources: dict[str, float]) -> tuple[float, float]:
    """(CPUs, GPUs) in `ray.cluster_resources()`: what a plan may use on a cluster a run joins
    (`--address`); a local run plans with its own machine's counts before Ray starts."""
    return float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0))


def cluster_custom(resources: dict[str, float]) -> dict[str, float]:
    """The custom resources in `ray.cluster_resources()` (every key but Ray's own CPU, GPU,
    memory and object store memory): what pools pinned with `resources` may take."""

    return {k: float(v) for k, v in resources.items() if k not in RAY_OWN_RESOURCES}


def _fmt(resources: dict[str, float]) -> str:
    return ", ".join(f"{name}={amount:g}" for name, amount in sorted(resources.items()))


def _check_custom(cfg: Config, plan: Plan) -> None:
    """Each custom resource the pinned pools take must be advertised by the cluster, in all;
    the error names the sections that ask for it."""
    if plan.cluster_custom is None:
        return
    for name, need in sorted(plan.custom_needed().items()):
        has = plan.cluster_custom.get(name, 0.0)
        if has + 1e-9 >= need:
            continue
        takers = [p for p in plan.pools if name in p.resources_each]
        parts = ", ".join(f"{p.name} {p.replicas} × {p.resources_each[name]:g}" for p in takers)
        keys = " / ".join(f"{p.section}.resources.{name}" for p in takers)
        where = (
            "a local run's Ray advertises no custom resources: remove them there, or join a "
            "cluster whose nodes do (--address)"
            if cfg.cluster.address == "local"
            else f"start nodes with `ray start --resources '{{\"{name}\": {need:g}}}'`"
        )
        plan.errors.append(
            f"the pools take {need:g} of custom resource '{name}' ({parts}) but the cluster "
            f"advertises {has:g}; lower or remove {keys}, or {where}"
        )


def _per_gpu(share: float, replicas: int, room: float = 1.0) -> int:
    """How many replicas asking for `share` of a GPU Ray can pack into `room` of one GPU."""
    return min(replicas, math.floor(room / share + 1e-9))


def _check_gpus(cfg: Config, plan: Plan) -> None:
    """The GPU rules on cuda: each value is a whole number of GPUs or a share of one; shares that
    cannot work are errors (two FSDP ranks on one GPU, vLLM claiming a whole GPU's memory
    beside another replica); a plan whose pools share a GPU gets a note."""
    g = cfg.generator
    lr = cfg.learner
    gen = plan.pools[1]
    learner = plan.pools[3]
    before = len(plan.errors)
    for p, key in ((gen, "generator.gpus_per_engine"), (learner, "learner.gpus_per_rank")):
        x = p.gpus_each
        if x <= 0:
            plan.errors.append(
                f"{key} = 0 but the device is cuda: each {p.name} needs a GPU; set it to 1 (a GPU "
                "of its own) or to a share of one such as 0.5 (Ray packs shares onto one GPU)"
            )
        elif x > 1 and x != int(x):
            plan.errors.append(
                f"{key} = {x:g}: above 1 a {p.name} needs a whole number of GPUs (a share, "
                f"0 < x < 1, puts it on one GPU beside others); set it to {math.floor(x)} or "
                f"{math.ceil(x)}"
            )
    if 0 < learner.gpus_each < 1 and lr.world_size > 1:
        plan.errors.append(
            f"learner.gpus_per_rank = {learner.gpus_each:g} with learner.world_size = "
            f"{lr.world_size}: FSDP2's NCCL refuses two ranks on one GPU ('Duplicate GPU "
            "detected'), so with more than one rank each needs a GPU of its own: set "
            "learner.gpus_per_rank = 1, or learner.world_size = 1 to share a GPU with a generator"
        )
    util = g.gpu_memory_utilization
    n_engines = g.num_engines + cfg.eval.generators  # the eval's set-aside engines too
    engines = _per_gpu(gen.gpus_each, n_engines) if 0 < gen.gpus_each < 1 else 0
    if engines > 1 and engines * util > 1:
        plan.errors.append(
            f"generator.gpus_per_engine = {gen.gpus_each:g} lets Ray put {engines} engines on one "
            f"GPU, and vLLM claims generator.gpu_memory_utilization = {util:g} of the whole GPU "
            f"for each ({engines * util:g} > 1): lower generator.gpu_memory_utilization to at "
            f"most {math.floor(100 / engines) / 100:g}, or set generator.gpus_per_engine = 1"
        )
    beside = 0
    if engines and 0 < learner.gpus_each < 1 and lr.world_size == 1:
        beside = _per_gpu(gen.gpus_each, n_engines, 1.0 - learner.gpus_each)
    if beside and beside * util >= 1:
        plan.errors.append(
            f"the learner rank (learner.gpus_per_rank = {learner.gpus_each:g}) shares its GPU "
            f"with up to {beside} generator engine(s) claiming generator.gpu_memory_utilization "
            f"= {util:g} of the whole GPU each, which leaves the learner no memory: lower "
            f"generator.gpu_memory_utilization (e.g. {math.floor(40 / beside) / 100:g}) so the "
            "learner's weights, optimizer state and activations fit in the rest"
        )
    elif beside:
        plan.notes.append(
            f"the pools share a device: the learner rank and up to {beside} generator engine(s) "
            f"on one GPU (learner.gpus_per_rank = {learner.gpus_each:g}, "
            f"generator.gpus_per_engine = {gen.gpus_each:g}). vLLM claims "
            f"generator.gpu_memory_utilization = {util:g} of the whole GPU's memory per engine, "
            f"not of its Ray share, and the learner starts first: it must fit in the other "
            f"{1 - beside * util:.0%} (weights, optimizer state, activations); lower "
            "generator.gpu_memory_utilization if either runs out of memory. The weight channel "
            "uses gloo over CPU copies on a shared GPU"
        )
    elif engines > 1:
        plan.notes.append(
            f"generator engines share GPUs: up to {engines} on one at generator.gpus_per_engine "
            f"= {gen.gpus_each:g}, each claiming generator.gpu_memory_utilization = {util:g} of "
            "the whole GPU's memory"
        )
    if plan.gpus > plan.cluster_gpus:
        plan.errors.append(
            f"the pools need {plan.gpus:g} GPUs but the cluster has {plan.cluster_gpus:g}; lower "
            "generator.num_engines or learner.world_size, or add GPUs"
        )
    elif len(plan.errors) == before and not _packs(plan.pools, plan.cluster_gpus):
        plan.errors.append(
            f"the pools need {plan.gpus:g} GPUs in all, but their shares do not pack onto "
            f"{plan.cluster_gpus:g} GPUs (a share of a GPU cannot span two): lower the replica "
            "counts or the shares, or add GPUs"
        )


def _packs(pools: list[PoolPlan], cluster_gpus: float) -> bool:
    """Whether the pools' GPU requests fit `cluster_gpus` GPUs: whole ones take whole GPUs, the
    shares are packed first-fit decreasing into what is left (as Ray must: no share spans two)."""
    whole = sum(p.gpus for p in pools if p.gpus_each >= 1)
    free = [1.0] * max(0, math.floor(cluster_gpus - whole + 1e-9))
    shares = sorted(p.gpus_each for p in pools if 0 < p.gpus_each < 1 for _ in range(p.replicas))
    for share in reversed(shares):
        i = next((i for i, room in enumerate(free) if room + 1e-9 >= share), None)
        if i is None:
            return False
        free[i] -= share
    return True


class PlacementGroups:
    """The placement groups of this process's replicas, by replica name; each lives exactly as
    long as its replica. `create` makes one (first removing the one the name still has, so a
    replaced replica's old group goes before the new one is made); `release` removes groups when
    their replicas go; `release_all` at the end of a run. Removing a group kills what still runs
    in it. Names without a group (CPU replicas, executors) are ignored, so callers need not know
    whether their replica had one."""

    def __init__(self, ready_timeout_s: float = 600.0):
        self.ready_timeout_s = ready_timeout_s
        """Seconds a new group may wait for its resources before creating it fails."""
        self._groups: dict[str, Any] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        with self._lock:
            return list(self._groups)

    def create(
        self, name: str, bundle: dict[str, float] | list[dict], strategy: str = "STRICT_PACK"
    ) -> Any:
        """A ready group `mc-<name>` of one bundle or a list (launch/run/learner_placement.py); raises,
        its group removed, when the cluster has no room for it within `ready_timeout_s`."""
        import ray
        from ray.util.placement_group import placement_group

        self.release(name)
        bundles = bundle if isinstance(bundle, list) else [bundle]
        pg = placement_group(bundles, strategy=strategy, name=f"mc-{name}")
        with self._lock:
            self._groups[name] = pg
        try:
            ray.get(pg.ready(), timeout=self.ready_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.release(name)
            raise RuntimeError(
                f"{name}: no room for its placement group {bundle} within "
                f"{self.ready_timeout_s:.0f} s: the cluster lacks free CPUs/GPUs (compare "
                "`microcoder launch ... --dry-run`'s plan with `ray status`); lower the replica "
                "counts or free the resources"
            ) from None
        return pg

    def release(self, *names: str) -> list[str]:
        """Remove the groups of these replicas (those that have one); returns their names."""
        with self._lock:
            gone = [(n, self._groups.pop(n)) for n in names if n in self._groups]
        if gone:
            import ray

            for _, pg in gone:
                if ray.is_initialized():
                    try:
                        ray.util.remove_placement_group(pg)
                    except Exception:  # Ray already gone: its groups went with it
                        pass
        return [n for n, _ in gone]

    def release_all(self) -> list[str]:
        """Remove every group this process still holds (the end of a run, also after errors)."""
        return self.release(*self.names())


GROUPS = PlacementGroups()
"""The process's placement groups: `replica_options` creates them, `release*` remove them."""


def release(*names: str) -> list[str]:
    """Remove the placement groups of these replicas; see `PlacementGroups.release`."""
    return GROUPS.release(*names)


def release_all() -> list[str]:
    """Remove every placement group this process holds; see `PlacementGroups.release_all`."""
    return GROUPS.release_all()


def replica_options(
    cpus: float,
    gpus: float,
    device: str,
    name: str,
    *,
    resources: dict[str, float] | None = None,
    own_group: bool | None = None,
) -> dict:
    """Ray `.options()` for one replica. On GPUs each replica gets its own placement group (in
    `GROUPS`, under `name`) with one bundle of its CPUs, GPUs and custom `resources`: whole GPUs
    keep replicas apart, shares let Ray pack them onto one GPU, the custom resources put the
    bundle on a node that advertises them. On CPUs plain logical CPU reservations suffice (no
    group; the CPUs are the actor class's): the options carry only the custom `resources`.
    `own_group` overrides that rule (True: a group of CPUs even on a CPU device), for tests on
    CPU-only Ray."""
    if own_group is None:
        own_group = device == "cuda" and bool(gpus)
    if not own_group:
        return {"resources": dict(resources)} if resources else {}
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    bundle = {key: amount for key, amount in (("CPU", cpus), ("GPU", gpus)) if amount}
    bundle.update(resources or {})
    pg = GROUPS.create(name, bundle)
    return {
        "scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    }

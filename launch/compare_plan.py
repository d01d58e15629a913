"""The grid of `microcoder compare`, checked before anything runs: every arm's config resolves
(a bad key or value names the arm), the --set do not fight the arms or the seeds, and
`--parallel` runs fit this machine's CPUs and GPUs.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from microcoder.launch.compare_arms import Arm, resolve_overrides
from microcoder.launch.compare_runner import CompareError, Job, capacity_error, make_job, slot_envs


@dataclass(frozen=True)
class Grid:
    """What compare runs."""

    jobs: list[Job]
    """Seed-major (every arm at seed 0, then at seed 1, ...): a grid stopped part-way has
    whole seeds of every arm."""
    overrides: dict[str, list[str]]
    """Per arm: the overrides its launches get after the recipe (then seed=S)."""
    envs: list[dict[str, str]]
    """One environment per concurrent slot (len = --parallel)."""


def plan_grid(
    recipe: Path, arms: list[Arm], seeds: list[int], sets: list[str], out: Path, parallel: int
) -> Grid:
    """Resolve and check every arm's config; the jobs and slots. Raises CompareError."""
    from microcoder.config import ConfigError
    from microcoder.launch.config import load_config

    if not recipe.is_file():
        raise CompareError(f"recipe {recipe} does not exist (recipes live in configs/)")
    if parallel < 1:
        raise CompareError(f"--parallel {parallel}: give 1 or more")
    for s in sets:
        if s.partition("=")[0].strip() in ("seed", "run_dir"):
            raise CompareError(
                f"--set {s}: compare sets seed and run_dir for each arm-seed itself; give "
                "seeds with --seeds and the folder with --out"
            )
    raw = tomllib.loads(recipe.read_text())
    overrides, configs = {}, {}
    for arm in arms:
        overrides[arm.name] = resolve_overrides(arm, raw, sets)
        try:
            configs[arm.name] = load_config(recipe, overrides[arm.name])
        except ConfigError as err:
            raise CompareError(f"arm {arm.name!r} does not resolve: {err}") from None
    jobs = [
        make_job(recipe, arm.name, seed, overrides[arm.name], out, configs[arm.name])
        for seed in seeds
        for arm in arms
    ]
    return Grid(jobs, overrides, envs_for(list(configs.values()), parallel))


def envs_for(configs: list, parallel: int) -> list[dict[str, str]]:
    """The slots' environments, after checking that `parallel` runs fit (the largest arm's
    placement plan against this machine)."""
    if parallel == 1:
        return [{}]
    if any(c.cluster.address != "local" for c in configs):
        raise CompareError(
            "--parallel > 1 runs private local clusters side by side; with cluster.address set "
            "to a shared cluster run one at a time (--parallel 1)"
        )
    from microcoder.device import resolve_device
    from microcoder.launch.placement import make_plan

    cpus = float(os.cpu_count() or 1)
    device = resolve_device(configs[0].cluster.device)
    visible = _visible_gpus() if device == "cuda" else []
    plans = [make_plan(c, device, cpus, float(len(visible))) for c in configs]
    cpus_each = max(p.cpus for p in plans)
    gpus_each = max(p.gpus for p in plans)
    why = capacity_error(parallel, cpus_each, gpus_each, cpus, len(visible))
    if why:
        raise CompareError(why)
    return slot_envs(parallel, int(-(-gpus_each // 1)), visible)


def _visible_gpus() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v for v in visible.split(",") if v.strip()]
    import torch

    return [str(k) for k in range(torch.cuda.device_count())]

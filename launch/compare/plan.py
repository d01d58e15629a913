"""The grid of `microcoder compare`, checked before anything runs: every arm's config resolves
(a bad key or value names the arm), the --set do not fight the arms or the seeds, and
`--parallel` runs fit this machine's CPUs and GPUs (or, by default, as many run at once as fit).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from microcoder.config import ConfigError
from microcoder.data.sources import is_synthetic
from microcoder.device import resolve_device
from microcoder.launch.compare.arms import Arm, resolve_overrides
from microcoder.launch.compare.runner import (
    CompareError,
    Job,
    capacity_error,
    make_job,
    runs_that_fit,
    slot_envs,
)
from microcoder.launch.config import load_config
from microcoder.launch.run.model_dir import ensure_model
from microcoder.launch.run.placement import make_plan


@dataclass(frozen=True)
class Grid:
    """What compare runs."""

    jobs: list[Job]
    """Seed-major (every arm at seed 0, then at seed 1, ...): a grid stopped part-way has
    whole seeds of every arm."""
    overrides: dict[str, list[str]]
    """Per arm: the overrides its launches get after the recipe (then seed=S)."""
    envs: list[dict[str, str]]
    """One environment per concurrent slot (len = the runs at once)."""
    why: str
    """How many run at once and why, for the command's first line."""
    notes: list[str]
    """The arms' config notes (Config.notes: settings that cannot act), each naming its arms."""
    models: list
    """One arm's Config per distinct model.path: what `prepare_models` builds before runs start
    side by side."""
    variance: list[str]
    """What the ± over seeds covers and what not (`seed_variance`), each naming its arms."""


def plan_grid(
    recipe: Path,
    arms: list[Arm],
    seeds: list[int],
    sets: list[str],
    out: Path,
    parallel: int | None,
) -> Grid:
    """Resolve and check every arm's config; the jobs and slots (`parallel` None: as many at
    once as fit this machine). Raises CompareError."""

    if not recipe.is_file():
        raise CompareError(f"recipe {recipe} does not exist (recipes live in configs/)")
    if parallel is not None and parallel < 1:
        raise CompareError(f"--parallel {parallel}: give 1 or more")
    for s in sets:
        if s.partition("=")[0].strip() in ("seed", "run_dir"):
            raise CompareError(
                f"--set {s}: compare sets seed and run_dir for each arm-seed itself; give "
                "seeds with --seeds and the folder with --out"
            )
    raw = tomllib.loads(recipe.read_text())
    overrides = {}
    configs = {}
    for arm in arms:
        overrides[arm.name] = resolve_overrides(arm, raw, sets)
        try:
            configs[arm.name] = load_config(recipe, overrides[arm.name])
        except ConfigError as err:
            raise CompareError(f"arm {arm.name!r} does not resolve: {err}") from None
    notes: dict[str, list[str]] = {}
    for arm in arms:  # a note shared by every arm is said once
        for note in configs[arm.name].notes():
            notes.setdefault(note, []).append(arm.name)
    jobs = [
        make_job(recipe, arm.name, seed, overrides[arm.name], out, configs[arm.name])
        for seed in seeds
        for arm in arms
    ]
    envs, why = envs_for(list(configs.values()), parallel, len(jobs))
    said = [
        f"{'every arm' if len(names) == len(arms) else 'arm ' + ', '.join(names)}: {note} "
        "(a --set of compare holds for every arm)"
        for note, names in notes.items()
    ]
    models = {c.model.path: c for c in configs.values()}
    variance: dict[str, list[str]] = {}
    for arm in arms:
        variance.setdefault(seed_variance(configs[arm.name]), []).append(arm.name)
    spread = [
        text if len(names) == len(arms) else f"arm {', '.join(names)}: {text}"
        for text, names in variance.items()
    ]
    return Grid(jobs, overrides, envs, why, said, list(models.values()), spread)


def seed_variance(cfg) -> str:
    """What differs between two seeds of one arm (so what its ± over seeds measures), and what
    stays the same, for the arm's resolved Config."""

    covered = ["the generators' sampling", "the truncation-mask draws"]
    same = ["the initial weights (every seed starts from model.path)"]
    if cfg.data.shuffle_seed is None:
        covered.append("the prompt order")
    else:
        same.append(f"the prompt order (data.shuffle_seed = {cfg.data.shuffle_seed} fixes it)")
    if is_synthetic(cfg.data.source):
        covered.append("the synthetic training and held-out tasks")
    else:
        same.append("the problems and the held-out set")
    return f"the ± over seeds covers {', '.join(covered)}; not {', '.join(same)}"


def prepare_models(grid: Grid, say) -> None:
    """Build (or warm-start) each model the runs will load, once, before runs start side by side:
    two launches building the same missing model folder at once would both train it and write
    over each other's files. A model already there costs a check."""
    if len(grid.envs) < 2:
        return  # one run at a time: the first launch builds it, as a launch by hand does

    for cfg in grid.models:
        say(f"compare: model {cfg.model.path}: ready before {len(grid.envs)} runs start at once")
        ensure_model(cfg.model, cfg)


def envs_for(configs: list, parallel: int | None, n_jobs: int) -> tuple[list[dict[str, str]], str]:
    """The slots' environments and why that many, after checking that `parallel` runs fit (the
    largest arm's placement plan against this machine); `parallel` None picks the most that
    fit, at most `n_jobs`."""
    if parallel == 1:
        return [{}], "1 at a time (--parallel 1)"
    if any(c.cluster.address != "local" for c in configs):
        if parallel is None:
            return [{}], "1 at a time (cluster.address is a shared cluster)"
        raise CompareError(
            "--parallel > 1 runs private local clusters side by side; with cluster.address set "
            "to a shared cluster run one at a time (--parallel 1)"
        )

    cpus = float(os.cpu_count() or 1)
    device = resolve_device(configs[0].cluster.device)
    visible = _visible_gpus() if device == "cuda" else []
    plans = [make_plan(c, device, cpus, float(len(visible))) for c in configs]
    cpus_each = max(p.cpus for p in plans)
    gpus_each = max(p.gpus for p in plans)
    room = f"each run plans {cpus_each:g} CPUs" + (f", {gpus_each:g} GPUs" if gpus_each else "")
    room += f"; this machine has {cpus:g} CPUs" + (f", {len(visible)} GPUs" if gpus_each else "")
    if parallel is None:
        parallel = min(runs_that_fit(cpus_each, gpus_each, cpus, len(visible)), max(n_jobs, 1))
        why = f"{parallel} at a time (as many as fit: {room})"
    else:
        error = capacity_error(parallel, cpus_each, gpus_each, cpus, len(visible))
        if error:
            raise CompareError(error)
        why = f"{parallel} at a time (--parallel {parallel}: {room})"
    return slot_envs(parallel, int(-(-gpus_each // 1)), visible), why


def _visible_gpus() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [v for v in visible.split(",") if v.strip()]
    import torch

    return [str(k) for k in range(torch.cuda.device_count())]

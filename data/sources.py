"""The problems a run's `[data]` section names: the bundled synthetic family or a problem file.

Read by the launcher (launch/problems.py renders and measures the training prompts) and by every
executor (actors/executor.py looks problems up by id to judge them), so both see the same set."""

from __future__ import annotations

from microcoder.data.config import DataConfig
from microcoder.data.problem import Problem


def load_run_problems(data: DataConfig, seed: int, split: str = "train") -> list[Problem]:
    """Problems of `split`: "train" = the whole source (a file's held-out fraction included, so
    executors can judge both); "heldout" = the synthetic family's held-out split ([] for files)."""
    if data.source == "synthetic":
        from microcoder.data.synthetic import generate_tasks

        return generate_tasks(seed, split=split)
    if split != "train":
        return []
    from microcoder.data.loaders import load_problems

    return load_problems(data.source, format=data.format)

"""The run's problems from `[data]`: the bundled synthetic family or a problem file."""

from __future__ import annotations

from microcoder.data.problem import Problem
from microcoder.launch.config import DataConfig


def load_run_problems(data: DataConfig, seed: int, split: str = "train") -> list[Problem]:
    """Problems of `split` ("train" or "heldout"; files have only "train")."""
    if data.source == "synthetic":
        from microcoder.data.synthetic import generate_tasks

        return generate_tasks(seed, split=split)
    if split != "train":
        return []
    from microcoder.data.loaders import load_problems

    fmt = {"auto": "auto", "microcoder": "jsonl"}.get(data.format, data.format)
    return load_problems(data.source, format=fmt)

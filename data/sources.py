"""The problems a run's `[data]` section names: a bundled synthetic family or a problem file.

A run reads them through its problem store (data/store.py: `build_store` writes a synthetic
family's train and held-out splits, or a file's rows, into RUN_DIR/problems.sqlite; the buffer
and the executors read that). `load_run_problems` loads a whole source in memory: for tests and
benchmarks on small sets.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from microcoder.data.config import DataConfig
from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import Problem

SYNTHETIC_VARIANTS: dict[str, str] = {
    "synthetic": "microcoder.data.synthetic.tasks",
    "synthetic-long": "microcoder.data.synthetic.long_answers",
}
"""`data.source` names of the bundled synthetic families → their module. Each module has
`generate_tasks(seed, split, n=None)` (train/held-out split by a stable hash of the task's
combination) and `tokenizer_corpus()` (what the warm-start tokenizer is trained on).
`synthetic`: one read and one print (answers of ~25 tiny-tokenizer tokens);
`synthetic-long`: four of those chained (~80 tokens; data/synthetic/long_answers.py)."""


def is_synthetic(source: str) -> bool:
    """True when `source` names a bundled synthetic family rather than a problem file."""
    return source in SYNTHETIC_VARIANTS


def synthetic_variant(name: str) -> ModuleType:
    """The module of the synthetic family `name`; ValueError naming the choices otherwise."""
    if name not in SYNTHETIC_VARIANTS:
        raise ValueError(
            f"unknown synthetic family {name!r}: set it to one of {', '.join(SYNTHETIC_VARIANTS)}"
        )
    return import_module(SYNTHETIC_VARIANTS[name])


def load_run_problems(data: DataConfig, seed: int, split: str = "train") -> list[Problem]:
    """Problems of `split`: "train" = the whole source (a file's held-out fraction included, so
    executors can judge both); "heldout" = a synthetic family's held-out split ([] for files)."""
    if is_synthetic(data.source):
        return synthetic_variant(data.source).generate_tasks(seed, split=split)
    if split != "train":
        return []

    return load_problems(data.source, format=data.format)

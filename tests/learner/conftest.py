"""Shared fixtures: a very small Qwen2 built locally (hidden 64, 2 layers, 275-token vocab); the
folder on sys.path for learner_ranks.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from microcoder.learner.models.tiny_model import SMALL_ARCH, build_tiny_model

HERE = str(Path(__file__).parent)  # for `from learner_ranks import spawn_ranks` (importlib mode)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

CORPUS = [
    "def add(a, b):\n    return a + b\n\nclass Stack:\n    def push(self, x):\n        pass\n"
] * 20


@pytest.fixture(scope="session")
def small_model(tmp_path_factory):
    """Path of a ~0.1 M-parameter HF model folder with a byte-level BPE tokenizer."""
    return build_tiny_model(
        tmp_path_factory.mktemp("small-model"), seed=0, corpus=CORPUS, vocab_size=300, **SMALL_ARCH
    )

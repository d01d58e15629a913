"""Shared fixtures: the tiny model is built once per test session (no download, ~4 s)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A freshly built tiny Qwen2 folder (seed 0), shared by every test of the session."""
    from microcoder.learner.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)

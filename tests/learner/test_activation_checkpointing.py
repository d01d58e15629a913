"""Activation checkpointing under FSDP2 (two gloo ranks): the decoder layers' forward runs again
in the backward pass, and the loss and every full gradient are the same as without it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_meta_init import run_memory_worker  # noqa: E402


@pytest.fixture(scope="module")
def results(small_model, tmp_path_factory):
    return run_memory_worker(small_model, tmp_path_factory.mktemp("ckpt"), "checkpointing")


@pytest.mark.slow
def test_checkpointed_layers_run_their_forward_again_in_backward(results):
    for r in results:
        assert [r[w]["layer_forwards"] for w in ("off", "before", "after")] == [1, 2, 2]


@pytest.mark.slow
def test_checkpointing_keeps_loss_and_gradients(results):
    for r in results:
        for when in ("before", "after"):
            assert r[when]["loss"] == r["off"]["loss"]
            assert r[when]["grad_names_equal"] and r[when]["grad_max_abs_diff"] <= 1e-7

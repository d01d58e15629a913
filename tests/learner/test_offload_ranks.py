"""Offload on 2 gloo ranks (issue 44, learner.offload), in one chain of spawned ranks
(train_worker.py, like the Ray learner actors) to keep it cheap: step 1 with sharded moments
streamed from the host ("optimizer"), a checkpoint, step 2 resumed from it with FSDP2's CPU
offload of the masters ("params"): the weights are bit-equal to 2 ranks without offload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from learner_ranks import spawn_ranks
from safetensors.torch import load_file

WORKER = Path(__file__).with_name("offload_worker.py")  # train_worker.py, recording placement


def run_two(model: Path, out: Path, mode: str, offload: str) -> tuple[list, dict]:
    """2 ranks of train_worker.py with learner.offload = `offload`; rank 0's metrics and the
    published weights. Checks that each rank's state was where `offload` puts it."""
    out.mkdir(parents=True, exist_ok=True)
    extra = json.dumps({"learner": {"offload": offload}})
    spawn_ranks(2, [str(WORKER), str(model), str(out), mode, "4096", extra])
    metrics = json.loads((out / "metrics0.json").read_text())
    weights = load_file(out / "weights.safetensors") if mode != "save" else {}
    for rank in range(2):
        placement = json.loads((out / f"offload{rank}.json").read_text())
        assert placement == {
            "moments_on_host": offload == "optimizer",
            "params_on_host": offload == "params",
        }, rank
    return metrics, weights


@pytest.fixture(scope="module")
def two_ranks_none(small_model, tmp_path_factory):
    return run_two(small_model, tmp_path_factory.mktemp("none"), "train", "none")


def assert_bit_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.slow
def test_two_ranks_step_streamed_then_resumed_with_params_offloaded_equal_no_offload(
    small_model, two_ranks_none, tmp_path
):
    saved, _ = run_two(small_model, tmp_path / "save", "save", "optimizer")
    assert saved[0]["grad_norm"] == two_ranks_none[0][0]["grad_norm"]
    ckpt = tmp_path / "save" / "ckpt"
    metrics, weights = run_two(small_model, tmp_path / "resume", f"from:{ckpt}", "params")
    assert metrics[1]["grad_norm"] == two_ranks_none[0][1]["grad_norm"]
    assert_bit_equal(weights, two_ranks_none[1])

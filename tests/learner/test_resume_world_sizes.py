"""Checkpoints users can ship and resume anywhere (issue 32): a checkpoint saved by 2 gloo ranks
resumes on 1 and on 3 ranks with the next step equal to the uninterrupted run's (1e-5); a bf16
learner saves its HF folder in bf16 (config.json says so) and still resumes exactly, from the
fp32 masters kept in the DCP state. One module: the worker runs share its fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from learner_ranks import spawn_ranks
from safetensors.torch import load_file

pytestmark = pytest.mark.timeout(900)  # three multi-rank runs in the first test's fixtures

WORKER = Path(__file__).with_name("train_worker.py")
BF16 = {"learner": {"dtype": "bfloat16"}}


def run_ranks(model: Path, out: Path, world: int, mode: str, extra: dict | None = None) -> list:
    """Run `world` worker processes (train_worker.py) to completion; rank 0's step metrics."""
    out.mkdir(parents=True, exist_ok=True)
    spawn_ranks(world, [str(WORKER), str(model), str(out), mode, "4096", json.dumps(extra or {})])
    return json.loads((out / "metrics0.json").read_text())


@pytest.fixture(scope="module")
def uninterrupted(small_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    return run_ranks(small_model, out, 1, "train"), load_file(out / "weights.safetensors")


@pytest.fixture(scope="module")
def saved_by_two(small_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("saved-by-two")
    run_ranks(small_model, out, 2, "save")
    return out / "ckpt"


@pytest.mark.slow
@pytest.mark.parametrize("world", [1, 3])
def test_two_ranks_checkpoint_resumes_on_another_world_size(
    world, small_model, saved_by_two, uninterrupted, tmp_path
):
    ref_metrics, ref_weights = uninterrupted
    metrics = run_ranks(small_model, tmp_path, world, f"from:{saved_by_two}")
    assert metrics[1]["version"] == 2
    assert metrics[1]["loss"] == pytest.approx(ref_metrics[1]["loss"], rel=1e-5, abs=1e-7)
    weights = load_file(tmp_path / "weights.safetensors")
    assert weights.keys() == ref_weights.keys()
    for k in weights:
        torch.testing.assert_close(weights[k], ref_weights[k], atol=1e-5, rtol=0, msg=k)


@pytest.mark.slow
def test_bf16_checkpoint_ships_bf16_and_resumes_exactly_from_the_fp32_masters(
    small_model, tmp_path_factory
):
    ref_out, out = tmp_path_factory.mktemp("bf16-ref"), tmp_path_factory.mktemp("bf16-resumed")
    ref_metrics = run_ranks(small_model, ref_out, 1, "train", BF16)
    metrics = run_ranks(small_model, out, 1, "resume", BF16)
    shipped = load_file(out / "ckpt" / "model.safetensors")
    assert {t.dtype for t in shipped.values()} == {torch.bfloat16}
    assert json.loads((out / "ckpt" / "config.json").read_text())["dtype"] == "bfloat16"
    assert metrics[1]["loss"] == ref_metrics[1]["loss"]
    ref_weights = load_file(ref_out / "weights.safetensors")
    for k, v in load_file(out / "weights.safetensors").items():
        assert torch.equal(v, ref_weights[k]), k

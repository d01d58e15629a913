"""Findings 3 (second bullet) and 4 of issue 31, on a real 2-rank CPU learner (gloo).

Gradients stay sharded during accumulation (learner.grad_sync = "every_micro_batch", the
default) with the same loss and gradients as one micro-batch per rank; the published weights
are in the serving dtype (bf16 here), equal to torch's own full state dict cast, gathered once
for tied weights, while checkpoints keep the fp32 masters. Runs tests/gpu_path/shard_worker.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "learner"))
from learner_ranks import spawn_ranks  # noqa: E402

pytestmark = pytest.mark.timeout(900)  # the module fixture spawns two ranks


def tied_copy(model_dir: Path, dst: Path) -> Path:
    """`model_dir` with its head tied to the embedding (Qwen2.5-0.5B/1.5B are tied)."""
    shutil.copytree(model_dir, dst)
    config = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    for f in dst.glob("*.safetensors"):
        weights = load_file(f)
        weights.pop("lm_head.weight", None)
        save_file(weights, f, metadata={"format": "pt"})
    return dst


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    """(reports of ranks 0 and 1, the folder of rank 0's saved tensors)."""
    out = tmp_path_factory.mktemp("shard")
    tied = tied_copy(Path(tiny_model_dir), out / "tied-model")
    spawn_ranks(2, [str(HERE / "shard_worker.py"), str(tiny_model_dir), str(tied), str(out)])
    return [json.loads((out / f"shard{r}.json").read_text()) for r in range(2)], out


@pytest.mark.slow
def test_gradients_are_sharded_after_every_non_final_micro_batch_by_default(run):
    for report in run[0]:
        every = report["every"]
        assert every["micro_batches"] >= 3
        assert every["sharded_after_non_final"] == [True] * (every["micro_batches"] - 1)


@pytest.mark.slow
def test_syncing_only_on_the_last_micro_batch_leaves_no_sharded_gradient_until_then(run):
    """The opt-in mode: FSDP2 keeps unsharded gradients meanwhile (the probe can tell)."""
    for report in run[0]:
        assert not any(report["last"]["sharded_after_non_final"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["every", "last"])
def test_accumulated_loss_and_gradients_equal_one_micro_batch_per_rank(run, mode):
    reports, out = run
    for report in reports:
        assert report[mode]["loss"] == pytest.approx(report["one"]["loss"], abs=1e-5, rel=1e-5)
    one = load_file(out / "grads-one.safetensors")
    got = load_file(out / f"grads-{mode}.safetensors")
    assert sorted(got) == sorted(one)
    for name in one:
        torch.testing.assert_close(got[name], one[name], rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.slow
def test_published_weights_are_the_fp32_masters_cast_to_the_serving_dtype(run):
    reports, out = run
    assert reports[0]["published_dtypes"] == ["torch.bfloat16"]
    assert reports[0]["masters_dtypes"] == reports[0]["torch_dtypes"] == ["torch.float32"]
    published = load_file(out / "published.safetensors")
    reference = load_file(out / "torch.safetensors")  # torch's get_model_state_dict
    for name, ref in reference.items():
        assert torch.equal(published[name], ref.to(torch.bfloat16)), name


@pytest.mark.slow
def test_checkpoint_weights_stay_the_fp32_masters(run):
    """`full_state_dict(masters=True)` (checkpoint.py) is torch's own state dict, bit for bit."""
    masters = load_file(run[1] / "masters.safetensors")
    reference = load_file(run[1] / "torch.safetensors")
    assert sorted(masters) == sorted(reference)
    assert all(torch.equal(masters[k], v) for k, v in reference.items())


@pytest.mark.slow
def test_tied_weights_are_gathered_once_and_only_rank_0_holds_a_copy(run):
    rank0, rank1 = run[0]
    assert rank0["keys_equal"] and rank0["tied_alias"]
    assert rank1["empty_off_rank0"]

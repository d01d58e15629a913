"""The FSDP2 training step across processes: 2 ranks equal 1 rank; resume equals no interruption.

Each rank is a separate process that joins the group from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE
in its env, as the Ray learner actors will.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from learner_ranks import spawn_ranks
from safetensors.torch import load_file

WORKER = Path(__file__).with_name("train_worker.py")


def run_ranks(
    model: Path,
    out: Path,
    world: int,
    mode: str = "train",
    budget: int = 4096,
    extra: dict | None = None,
) -> list[dict]:
    """Run `world` worker processes to completion; return rank 0's per-step metrics."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [str(WORKER), str(model), str(out), mode, str(budget), json.dumps(extra or {})]
    spawn_ranks(world, argv)
    return json.loads((out / "metrics0.json").read_text())


@pytest.fixture(scope="module")
def reference(small_model, tmp_path_factory):
    """One rank, one micro-batch per step, two uninterrupted steps."""
    out = tmp_path_factory.mktemp("ref")
    return run_ranks(small_model, out, 1), load_file(out / "weights.safetensors")


def assert_same_weights(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=0, msg=k)


@pytest.mark.slow
def test_two_ranks_with_accumulation_equal_one_rank(small_model, tmp_path, reference):
    ref_metrics, ref_weights = reference
    metrics = run_ranks(small_model, tmp_path, 2, budget=96)  # several micro-batches per rank
    for m, r in zip(metrics, ref_metrics, strict=True):
        assert m["loss"] == pytest.approx(r["loss"], rel=1e-4, abs=1e-7)
        assert m["grad_norm"] == pytest.approx(r["grad_norm"], rel=1e-4)
        assert m["clip_frac"] == pytest.approx(r["clip_frac"], abs=1e-9)
    assert_same_weights(load_file(tmp_path / "weights.safetensors"), ref_weights, atol=1e-5)


@pytest.mark.slow
def test_two_ranks_with_small_logprob_chunks_equal_one_rank(small_model, tmp_path, reference):
    """5-token log-prob chunks (several per micro-batch, the last one short) on 2 ranks: the head
    runs outside the model's forward, and FSDP2 still reduces its gradient like the reference's
    (one chunk per micro-batch, 1 rank)."""
    ref_metrics, ref_weights = reference
    extra = {"learner": {"logprob_chunk_tokens": 5}}
    metrics = run_ranks(small_model, tmp_path, 2, budget=96, extra=extra)
    for m, r in zip(metrics, ref_metrics, strict=True):
        assert m["loss"] == pytest.approx(r["loss"], rel=1e-4, abs=1e-7)
        assert m["grad_norm"] == pytest.approx(r["grad_norm"], rel=1e-4)
        assert m["entropy"] == pytest.approx(r["entropy"], rel=1e-5)
    assert_same_weights(load_file(tmp_path / "weights.safetensors"), ref_weights, atol=1e-5)


@pytest.fixture(scope="module")
def resumed(small_model, tmp_path_factory):
    """One rank: a step, checkpoint, a new Learner from the checkpoint, a step."""
    out = tmp_path_factory.mktemp("resumed")
    return out, run_ranks(small_model, out, 1, mode="resume")


@pytest.mark.slow
def test_resume_from_checkpoint_continues_exactly(resumed, reference):
    (out, metrics), (ref_metrics, ref_weights) = resumed, reference
    assert metrics[1]["loss"] == ref_metrics[1]["loss"]
    assert metrics[1]["version"] == 2
    assert_same_weights(load_file(out / "weights.safetensors"), ref_weights, atol=0)


@pytest.mark.slow
def test_checkpoint_is_a_loadable_hf_folder(resumed):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = resumed[0] / "ckpt"
    model = AutoModelForCausalLM.from_pretrained(ckpt)
    tok = AutoTokenizer.from_pretrained(ckpt)
    saved = load_file(ckpt / "model.safetensors")
    assert model.config.use_cache and tok.eos_token == "<|im_end|>"
    torch.testing.assert_close(model.state_dict()["lm_head.weight"], saved["lm_head.weight"])
    assert json.loads((ckpt / "trainer_state.json").read_text())["policy_version"] == 1


@pytest.mark.slow
def test_mini_batches_kl_and_tis_off_train_one_version_per_batch(small_model, tmp_path):
    extra = {"learner": {"mini_batches": 2}, "algorithm": {"kl_coef": 0.1, "off_policy": "none"}}
    metrics = run_ranks(small_model, tmp_path, 1, extra=extra)
    assert [m["version"] for m in metrics] == [1, 2]
    assert all(m["is_weight_mean"] == 1.0 for m in metrics)
    assert metrics[1]["kl"] > 0  # the policy has moved away from the reference
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in metrics)

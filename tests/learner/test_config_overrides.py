"""model.config_overrides in the learner: a tiny llama (RoPE theta 500,000) with a linear RoPE
override. The learner's log-probs equal transformers' forward of a folder whose config.json
holds the same RoPE (written here by hand, not by the code under test), differ from the folder
without it, and the checkpoint it saves carries the override; the generators' vLLM
`hf_overrides` carry the same complete rope_parameters, theta included."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from family_models import COMMON

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines.build import engine_kwargs
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.models import logprob_check as lc
from microcoder.learner.models.config_overrides import model_config
from microcoder.learner.models.model_check import check_model
from microcoder.learner.trainer import Learner

THETA = 500000.0
OVERRIDE = {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}
EXPECTED_ROPE = {"rope_type": "linear", "factor": 4.0, "rope_theta": THETA}
TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def folders(tmp_path_factory, small_model):
    """(the tiny llama, a copy whose config.json holds the overridden RoPE); the small model's
    tokenizer beside the weights, which a checkpoint copies."""
    from transformers import AutoConfig, AutoModelForCausalLM

    root = tmp_path_factory.mktemp("overrides")
    rope = {"rope_type": "default", "rope_theta": THETA}
    config = AutoConfig.for_model("llama", **COMMON, rope_parameters=rope)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(root / "plain")
    for file in small_model.glob("tokenizer*"):
        shutil.copy(file, root / "plain" / file.name)
    shutil.copytree(root / "plain", root / "edited")
    raw = json.loads((root / "edited" / "config.json").read_text())
    raw["rope_parameters"] = EXPECTED_ROPE
    (root / "edited" / "config.json").write_text(json.dumps(raw))
    return root / "plain", root / "edited"


@pytest.fixture(scope="module")
def learner(folders):
    cfg = LearnerConfig(logprob_chunk_tokens=7, packing=True, micro_batch_tokens=512)
    return Learner(folders[0], cfg, AlgorithmConfig(), config_overrides=OVERRIDE)


def test_learner_logprobs_with_an_override_equal_transformers_with_it(folders, learner):
    seqs = lc.seeded_sequences(300)  # 23 + 17 tokens: positions where the scaling differs
    got = lc.learner_logprobs(learner, seqs, TEMPERATURE)
    assert lc.max_abs_diff(got, lc.reference_logprobs(folders[1], seqs, TEMPERATURE)) <= 1e-5
    assert lc.max_abs_diff(got, lc.reference_logprobs(folders[0], seqs, TEMPERATURE)) > 1e-3


def test_a_rope_override_keeps_the_models_theta():
    from microcoder.learner.models.config_overrides import resolved_rope

    current = {"rope_type": "default", "rope_theta": THETA}
    assert resolved_rope(current, OVERRIDE) == EXPECTED_ROPE
    assert resolved_rope(current, {"rope_theta": 1e6}) == {**current, "rope_theta": 1e6}
    assert resolved_rope(current, {"max_position_embeddings": 4096}) is None


def test_the_saved_checkpoint_carries_the_override(folders, learner, tmp_path):
    learner.save_checkpoint(tmp_path / "ckpt")
    saved = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert saved["rope_parameters"] == EXPECTED_ROPE


def test_the_generators_engine_gets_the_learners_rope(folders, learner):
    kw = engine_kwargs(str(folders[0]), GeneratorConfig(), "cpu", config_overrides=OVERRIDE)
    assert kw["hf_overrides"] == {"rope_parameters": dict(learner.model.config.rope_parameters)}
    assert kw["hf_overrides"]["rope_parameters"] == EXPECTED_ROPE
    plain = engine_kwargs(str(folders[0]), GeneratorConfig(), "cpu")
    assert "hf_overrides" not in plain


def test_model_check_applies_the_override_to_the_learner_and_the_reference(folders):
    report = check_model(folders[0], TEMPERATURE, config_overrides=OVERRIDE)
    assert report["config_overrides"] == OVERRIDE
    assert max(report["logprobs"]["max_abs_diff"].values()) <= 1e-5
    assert report["ok"]


def test_model_config_without_overrides_is_the_folders(folders):
    assert model_config(folders[0]).rope_parameters == {"rope_type": "default", "rope_theta": THETA}
    assert model_config(folders[0], {"max_position_embeddings": 64}).max_position_embeddings == 64

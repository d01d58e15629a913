"""Parameter counts from config.json alone (learner/models/model_shape.py): every public config in
tests/fixtures/models within 3% of its published count, and equal to transformers' own count of
the model built on the meta device; hand counts for the mixture-of-experts parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from microcoder.learner.models.model_shape import ModelShape

MODELS = Path(__file__).parents[1] / "fixtures" / "models"
FIXTURES = sorted(p.name for p in MODELS.iterdir() if (p / "config.json").is_file())

PUBLISHED = {
    # folder: parameters as the model's card states them (billions)
    "Qwen2.5-Coder-0.5B-Instruct": 0.49,
    "Qwen2.5-Coder-1.5B-Instruct": 1.54,
    "Qwen2.5-Coder-7B-Instruct": 7.61,
    "Qwen2.5-Coder-14B-Instruct": 14.7,
    "Qwen3-4B-Instruct-2507": 4.0,
    "Qwen3-8B": 8.2,
    "Qwen3-30B-A3B": 30.5,
    "Llama-3.1-8B-Instruct": 8.03,
    "Mistral-7B-v0.1": 7.24,
    "gemma-2-9b": 9.24,
}
"""Published parameter counts, B (each model's Hugging Face card)."""


def config(name: str) -> dict:
    return json.loads((MODELS / name / "config.json").read_text())


def test_every_fixture_states_its_published_count() -> None:
    assert sorted(PUBLISHED) == FIXTURES


@pytest.mark.parametrize("name", FIXTURES)
def test_count_is_within_3_percent_of_the_published_count(name: str) -> None:
    count = ModelShape.from_config(config(name)).params() / 1e9
    assert abs(count / PUBLISHED[name] - 1) <= 0.03, (name, count)


@pytest.mark.parametrize("name", FIXTURES)
def test_count_equals_transformers_on_the_meta_device(name: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config(name)))
    expected = sum(p.numel() for p in model.parameters())
    assert ModelShape.from_config(config(name)).params() == expected


def test_a_moe_counts_every_expert_and_activates_top_k() -> None:
    shape = ModelShape.from_config(config("Qwen3-30B-A3B"))
    # 48 layers x 128 experts x (gate, up, down) of 2048 x 768, and a 128 x 2048 router each
    assert shape.expert_params() == 128 * 3 * 2048 * 768
    assert shape.moe_layer_params() - shape.attention_params() == 128 * 3 * 2048 * 768 + 128 * 2048
    assert abs(shape.active_params() / 3.3e9 - 1) < 0.03  # "A3B": 3.3 B activated


SMALL_MOE = dict(
    model_type="qwen2_moe",
    hidden_size=8,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=32,
    moe_intermediate_size=4,
    shared_expert_intermediate_size=16,
    num_experts=6,
    num_experts_per_tok=2,
    decoder_sparse_step=2,
    mlp_only_layers=[3],
    vocab_size=20,
    tie_word_embeddings=True,
)
"""Qwen2-MoE small enough to count by hand: layer 1 sparse (step 2), layer 3 dense by
mlp_only_layers, layers 0 and 2 dense by the step."""


def test_shared_experts_router_and_dense_layers_match_a_hand_count() -> None:
    shape = ModelShape.from_config(SMALL_MOE)
    attn = 8 * 8 + 2 * 8 * 4 + 8 * 8 + (8 + 2 * 4) + 2 * 8  # q k v o, q/k/v bias, two norms
    dense = attn + 3 * 8 * 32
    sparse = attn + 6 * 3 * 8 * 4 + 6 * 8 + 3 * 8 * 16 + 8  # experts, router, shared + its gate
    assert (shape.moe_layers, shape.dense_layers) == (1, 3)
    assert shape.params() == 3 * dense + sparse + 20 * 8 + 8


def test_small_moe_equals_transformers() -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**SMALL_MOE))
    assert ModelShape.from_config(SMALL_MOE).params() == sum(p.numel() for p in model.parameters())


def test_explicit_head_dim_is_used_over_hidden_over_heads() -> None:
    shape = ModelShape.from_config(config("gemma-2-9b"))  # 16 heads of 256 > 3584 / 16
    assert (shape.head_dim, shape.q_width, shape.layer_norms) == (256, 4096, 4)


def test_a_multimodal_config_is_counted_from_its_text_config() -> None:
    text = config("Qwen3-8B")
    wrapped = {"model_type": "qwen3", "text_config": text, "vision_config": {"hidden_size": 1}}
    assert ModelShape.from_config(wrapped).params() == ModelShape.from_config(text).params()


def test_gemma2_attention_is_soft_capped_and_half_its_layers_windowed() -> None:
    shape = ModelShape.from_config(config("gemma-2-9b"))
    assert (shape.attn_softcap, shape.sliding_window, shape.window_layers) == (50.0, 4096, 21)
    assert ModelShape.from_config(config("Qwen3-8B")).sliding_window == 0  # use_sliding_window off

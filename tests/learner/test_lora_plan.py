"""learner.lora in the memory plan (adapter counts against peft's own injection) and the
config-time refusals of what vLLM cannot serve as an adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from microcoder.launch.config import load_config
from microcoder.launch.run.command import model_family_errors
from microcoder.launch.run.memory_check import learner_inputs
from microcoder.learner.config import DENSE_TARGETS, LoraConfig
from microcoder.learner.models.families import lora_errors
from microcoder.learner.models.memory_plan import (
    ModelShape,
    lora_param_count,
    plan_learner,
    plan_save,
)

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "fixtures" / "models"
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def _peft_count(config: dict, targets) -> int:
    """Adapter parameters peft injects into transformers' model of `config` (meta device)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from microcoder.learner.lora import apply_lora

    hf = AutoConfig.for_model(**{k: v for k, v in config.items() if k != "architectures"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf)
    apply_lora(model, LoraConfig(rank=16, targets=list(targets)))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize(
    ("model", "targets"),
    [
        ("Qwen2.5-Coder-7B-Instruct", DENSE_TARGETS),
        ("Qwen2.5-Coder-7B-Instruct", ("q_proj", "v_proj")),
        ("Llama-3.1-8B-Instruct", DENSE_TARGETS),
        ("Qwen3-30B-A3B", ATTENTION),
    ],
)
def test_the_plans_adapter_count_is_what_peft_injects(model, targets):
    config = json.loads((MODELS / model / "config.json").read_text())
    shape = ModelShape.from_config(config)
    assert lora_param_count(shape, 16, tuple(targets)) == _peft_count(config, targets)


def test_a_lora_plan_holds_the_base_in_bf16_and_trains_only_the_adapters():
    shape = ModelShape.from_folder(MODELS / "Qwen2.5-Coder-7B-Instruct")
    recipe = load_config(REPO / "configs" / "lora-7b-1gpu.toml", ["learner.world_size=2"])
    inputs = learner_inputs(recipe, "cuda") | {"offload": "none"}
    assert inputs["lora_rank"] == 16 and inputs["compute_bytes"] == 2
    lora = plan_learner(shape, **inputs)
    full = plan_learner(shape, **{k: v for k, v in inputs.items() if not k.startswith("lora")})
    p = shape.params()
    n = lora_param_count(shape, 16, DENSE_TARGETS)
    assert lora.lora_params == n == 40_370_176  # 28 layers x 16 x (in + out) summed
    assert lora.params == (2 * p + 4 * n) // 2
    assert (lora.grads, lora.optimizer) == (4 * n // 2, 8 * n // 2)
    assert lora.unsharded_grads == 0 and lora.head_grad_chunks == 0
    assert lora.publish_host == 4 * n
    assert lora.peak() < full.peak() / 2
    # a checkpoint: bf16 base files + fp32 adapter folder, and 12 bytes a trained parameter
    # (masters + AdamW) over the 2 ranks, instead of 12 bytes for every parameter
    save, full_save = plan_save(shape, 2, 2, 2, 1, n), plan_save(shape, 2, 2, 2)
    assert save.total == 2 * p + 4 * n + 12 * n
    assert full_save.total == 2 * p + 12 * p and save.snapshot_host < full_save.snapshot_host / 5


def test_expert_targets_on_a_moe_model_and_unserved_families_are_refused():
    moe = json.loads((MODELS / "Qwen3-30B-A3B" / "config.json").read_text())
    (err,) = lora_errors(moe, list(DENSE_TARGETS))
    assert "experts" in err and "gate_proj" in err and 'targets = ["q_proj"' in err
    assert lora_errors(moe, list(ATTENTION)) == []
    dense = json.loads((MODELS / "Qwen2.5-Coder-7B-Instruct" / "config.json").read_text())
    assert lora_errors(dense, list(DENSE_TARGETS)) == []
    assert "not proven to be served" in lora_errors({"model_type": "phi3"}, ["q_proj"])[0]


def test_the_launch_refuses_a_moe_recipe_with_lora_on_its_experts():
    recipe = REPO / "configs" / "qwen3-30b-a3b-8gpu.toml"
    cfg = load_config(recipe, ["learner.lora.rank=16"])
    errors = model_family_errors(cfg, str(MODELS / "Qwen3-30B-A3B"))
    assert any("experts of its MoE layers" in e for e in errors)
    assert model_family_errors(load_config(recipe), str(MODELS / "Qwen3-30B-A3B")) == []

"""LoRA on the learner (learner/lora.py): adapter names and folder as PEFT's own, checked
against peft's get_peft_model / PeftModel.from_pretrained as the independent reference."""

from __future__ import annotations

import json
import typing

import pytest
import torch

from microcoder.learner.config import VLLM_LORA_RANKS, LearnerConfig, LoraConfig
from microcoder.learner.lora import (
    adapter_config,
    adapter_state_dict,
    apply_lora,
    base_state_dict,
    init_adapters,
    merged_state_dict,
    write_adapter_folder,
)

CFG = LoraConfig(rank=8, alpha=16, targets=["q_proj", "v_proj", "down_proj"])


def _trained_lora_model(path):
    """The HF model at `path` with adapters, B made non-zero (as after training)."""
    from transformers import AutoModelForCausalLM

    model = apply_lora(AutoModelForCausalLM.from_pretrained(path), CFG)
    init_adapters(model, seed=3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    return model


def test_only_adapters_are_trainable_and_named_as_peft_saves_them(small_model):
    import peft
    from transformers import AutoModelForCausalLM

    model = _trained_lora_model(small_model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    reference = peft.get_peft_model(
        AutoModelForCausalLM.from_pretrained(small_model),
        peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"]),
    )
    ours = adapter_state_dict(model)
    theirs = peft.get_peft_model_state_dict(reference)
    assert set(ours) == set(theirs)
    assert all(ours[k].shape == theirs[k].shape for k in ours)


def test_adapter_folder_loads_in_peft_and_merged_weights_give_the_same_logits(
    small_model, tmp_path
):
    import peft
    from transformers import AutoModelForCausalLM

    model = _trained_lora_model(small_model).eval()
    ids = torch.tensor([[1, 5, 9, 17, 30, 2]])
    with torch.no_grad():
        want = model(ids).logits
    folder = write_adapter_folder(
        adapter_state_dict(model), adapter_config(CFG, str(small_model)), tmp_path / "adapter"
    )
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["peft_type"] == "LORA"
    loaded = peft.PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(small_model), folder
    ).eval()
    with torch.no_grad():
        got = loaded(ids).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    base = AutoModelForCausalLM.from_pretrained(small_model)
    merged = merged_state_dict(base_state_dict(model.state_dict()), adapter_state_dict(model), CFG)
    base.load_state_dict(merged)
    with torch.no_grad():
        assert not torch.allclose(
            base.eval()(ids).logits, AutoModelForCausalLM.from_pretrained(small_model)(ids).logits
        )
        torch.testing.assert_close(base(ids).logits, want, rtol=0, atol=1e-4)


def test_the_ranks_are_the_installed_vllms_and_others_are_refused():
    from vllm.config.lora import MaxLoRARanks

    assert tuple(typing.get_args(MaxLoRARanks)) == VLLM_LORA_RANKS
    with pytest.raises(ValueError, match="not a rank vLLM serves"):
        LearnerConfig(lora={"rank": 12})
    with pytest.raises(ValueError, match="choose among"):
        LearnerConfig(lora={"targets": ["lm_head"]})
    assert LearnerConfig().lora is None

"""The engine arguments of a LoRA generator (actors/engines/adapters.py `lora_engine_kwargs`) and
the bench's adapter shapes (bench/weight_sync.py `lora_shapes`) against peft's own adapter."""

from __future__ import annotations

import pytest

from microcoder.actors.engines.adapters import lora_engine_kwargs, served_lora_rank
from microcoder.actors.engines.args import engine_args_problems


@pytest.mark.parametrize(("rank", "served"), [(1, 1), (2, 8), (8, 8), (9, 16), (500, 512)])
def test_the_rank_is_rounded_up_to_one_vllm_serves(rank, served):
    assert served_lora_rank(rank) == served


def test_a_rank_above_vllms_largest_is_refused_naming_the_limit():
    with pytest.raises(ValueError, match="largest max_lora_rank 512"):
        served_lora_rank(513)


def test_an_engine_serves_the_versions_kept_and_adds_one_before_removing_one():
    kw = lora_engine_kwargs(rank=12, versions_kept=3)
    assert kw == {"enable_lora": True, "max_lora_rank": 16, "max_loras": 3, "max_cpu_loras": 4}


def test_the_lora_engine_arguments_are_set_through_learner_lora_only():
    problems = engine_args_problems(["enable_lora", "max_lora_rank", "max_loras"], ["x"])
    assert all("learner.lora" in p for p in problems) and len(problems) == 3


def test_the_bench_adapter_has_peft_names_and_shapes(tiny_model_dir):
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    from microcoder.bench.weight_sync import LORA_TARGETS, lora_shapes

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    shapes = [(n, tuple(p.shape)) for n, p in model.state_dict().items()]
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=list(LORA_TARGETS)))
    want = {k: tuple(v.shape) for k, v in get_peft_model_state_dict(peft).items()}
    assert dict(lora_shapes(shapes, 8)) == want

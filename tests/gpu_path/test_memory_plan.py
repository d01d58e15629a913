"""The memory plan's arithmetic (learner/models/memory_plan.py) against hand counts and transformers."""

from __future__ import annotations

import pytest
from import_probe import heavy_imports
from plan_testing import FOUR_RANKS

from microcoder.learner.models.memory_plan import (
    LOGIT_BLOCKS,
    VLLM_ACTIVATION_RESERVE,
    GiB,
    ModelShape,
    ShapeError,
    largest_fitting,
    plan_generator,
    plan_learner,
    qwen25_shape,
)

SMALL = dict(
    model_type="qwen2",
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=16,
    vocab_size=32,
    tie_word_embeddings=False,
)
"""A Qwen2 small enough to count by hand: head_dim 4, q width 8, kv width 4."""

QWEN_05B = {"model_type": "qwen2", **qwen25_shape("0.5b")}


def test_small_shape_parameters_match_a_hand_count() -> None:
    # layer: q 8x8 + k 8x4 + v 8x4 + o 8x8 + biases 8+4+4 + MLP 3x8x16 + 2 norms x 8
    layer = 64 + 32 + 32 + 64 + 16 + 384 + 16
    root = 2 * 32 * 8 + 8  # embeddings, untied head, final norm
    shape = ModelShape.from_config(SMALL)
    assert (shape.layer_params(), shape.root_params()) == (layer, root)
    assert shape.params() == 2 * layer + root


@pytest.mark.parametrize("tied", [False, True])
def test_parameter_count_matches_transformers(tied: bool) -> None:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    fields = {**SMALL, "tie_word_embeddings": tied}
    fields.pop("model_type")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(Qwen2Config(**fields))
    expected = sum(p.numel() for p in model.parameters())
    assert ModelShape.from_config({**SMALL, "tie_word_embeddings": tied}).params() == expected


def test_qwen_half_b_shape_has_its_published_parameter_count() -> None:
    assert ModelShape.from_config(QWEN_05B).params() == 494_032_768


def test_learner_plan_matches_a_hand_computation() -> None:
    shape = ModelShape.from_config(SMALL)
    p, w, b, t, chunk = shape.params(), 2, 2, 64, 16
    plan = plan_learner(
        shape,
        world_size=w,
        compute_bytes=b,
        micro_batch_tokens=t,
        logprob_chunk_tokens=chunk,
        activation_checkpointing=False,
    )
    assert (plan.params, plan.grads, plan.optimizer) == (4 * p // w, 4 * p // w, 8 * p // w)
    # per token and layer, bf16: input 8, q k v 8+4+4, roped q k 8+4, attention out twice 16,
    # residual 8, MLP 4 x 16 = 124 values x 2 B, plus two fp32/bf16 norms of 8x4 + 8x4 + 8x2 + 8x2 B
    norm = 32 + 32 + 16 + 16
    per_layer = 124 * 2 + 2 * norm
    outside = norm + 2 * 2 * 8  # final norm, final hidden states and the rows gathered for the head
    assert plan.activations == t * (2 * per_layer + outside)
    assert plan.activations_ckpt == t * (2 * 8 * 2 + per_layer + outside)
    assert plan.logprob_head == chunk * 32 * (LOGIT_BLOCKS * 4 + 2)
    assert plan.unsharded_params == shape.root_params() * 2 + 2 * shape.layer_params() * 2
    assert (plan.unsharded_grads, plan.head_grad_chunks) == (32 * 8 * (2 + 4), 32 * 8 * 2)
    assert plan.layer_grad == shape.layer_params() * (2 + 4)  # bf16 gradient, fp32 reduce input
    assert plan.accumulated_grads == 0
    unsharded = plan.unsharded_params + plan.unsharded_grads + plan.layer_grad
    head = plan.logprob_head + plan.head_grad_chunks
    assert plan.backward_step() == max(plan.activations, plan.grads) + head + unsharded


def test_with_checkpointing_the_head_and_the_recompute_are_not_alive_at_once() -> None:
    shape = ModelShape.from_config(SMALL)
    kw = dict(world_size=1, compute_bytes=4, logprob_chunk_tokens=16, activation_checkpointing=True)
    for t in (64, 4096):
        plan = plan_learner(shape, micro_batch_tokens=t, **kw)
        saved = t * (2 * 8 * 4) + t * (2 * 4 * 8 + 2 * 4 * 8)  # layer inputs; final norm + hidden
        assert plan.recompute == t * (124 * 4 + 2 * (2 * 4 * 8))
        assert plan.activations_ckpt == saved + plan.recompute
        unsharded = plan.unsharded_params + plan.unsharded_grads + plan.layer_grad
        head = plan.logprob_head + plan.head_grad_chunks
        head_or_layer = max(head, plan.recompute + plan.grads)
        assert plan.backward_step() == saved + head_or_layer + unsharded


def test_unsharded_gradient_accumulation_adds_a_full_fp32_gradient() -> None:
    shape = ModelShape.from_config(QWEN_05B)
    kw = {**FOUR_RANKS, "micro_batch_tokens": 4096}
    sharded = plan_learner(shape, **kw)
    kept = plan_learner(shape, grad_accumulation_unsharded=True, **kw)
    assert kept.peak() - sharded.peak() == 4 * shape.params()


def test_checkpointing_shrinks_activations_at_long_micro_batches() -> None:
    shape = ModelShape.from_config(QWEN_05B)
    kw = dict(world_size=1, compute_bytes=2, micro_batch_tokens=16384, logprob_chunk_tokens=1024)
    off = plan_learner(shape, activation_checkpointing=False, **kw)
    on = plan_learner(shape, activation_checkpointing=True, **kw)
    assert on.activations * 5 < off.activations
    assert (on.activations_no_ckpt, off.activations_ckpt) == (off.activations, on.activations)


def test_largest_micro_batch_fits_and_the_next_step_does_not() -> None:
    shape = ModelShape.from_config(QWEN_05B)
    kw = dict(
        world_size=1, compute_bytes=2, logprob_chunk_tokens=1024, activation_checkpointing=False
    )
    room = 24 * GiB
    n = largest_fitting("micro_batch_tokens", room, shape, 1 << 20, **kw)
    assert n > 0 and n % 256 == 0
    assert plan_learner(shape, micro_batch_tokens=n, **kw).peak() <= room
    assert plan_learner(shape, micro_batch_tokens=n + 256, **kw).peak() > room


def test_smallest_world_size_fits_and_one_less_does_not() -> None:
    shape = ModelShape.from_config(QWEN_05B)
    kw = {k: v for k, v in FOUR_RANKS.items() if k != "world_size"}
    room = 6 * GiB
    w = largest_fitting("world_size", room, shape, 64, **kw)
    assert w > 1
    assert plan_learner(shape, world_size=w, **kw).peak() <= room
    assert plan_learner(shape, world_size=w - 1, **kw).peak() > room


def test_generator_kv_cache_is_what_the_budget_leaves() -> None:
    shape = ModelShape.from_config(QWEN_05B)
    plan = plan_generator(
        shape,
        tensor_parallel=1,
        dtype_bytes=2,
        gpu_bytes=24 * GiB,
        gpu_memory_utilization=0.5,
        max_prompt_tokens=1024,
        max_response_tokens=7168,
    )
    weights = 494_032_768 * 2
    kv = 12 * GiB - weights - VLLM_ACTIVATION_RESERVE
    per_token = 2 * 24 * 2 * 64 * 2  # keys and values, 24 layers, 2 KV heads of 64, bf16
    assert (plan.weights, plan.kv_cache, plan.kv_bytes_per_token) == (weights, kv, per_token)
    assert plan.sequences == kv // (per_token * 8192)


def test_tensor_parallel_splits_weights_and_kv_heads() -> None:
    shape = ModelShape.from_config({**QWEN_05B, "num_key_value_heads": 4})
    kw = dict(
        dtype_bytes=2,
        gpu_bytes=80 * GiB,
        gpu_memory_utilization=0.9,
        max_prompt_tokens=1024,
        max_response_tokens=1024,
    )
    one, two = (plan_generator(shape, tensor_parallel=tp, **kw) for tp in (1, 2))
    assert (two.weights, two.kv_bytes_per_token) == (one.weights // 2, one.kv_bytes_per_token // 2)


def test_missing_config_json_says_how_to_provide_the_shape(tmp_path) -> None:
    with pytest.raises(ShapeError, match=r"config\.json.*Hub page"):
        ModelShape.from_folder(tmp_path / "absent")


def test_planner_imports_nothing_heavy() -> None:
    assert heavy_imports("import microcoder.learner.models.memory_plan") == []

"""The plan of a learner rank under the long-context knobs (learner/models/memory_plan.py): the
bin of the longest sequence, sequence parallelism, offload, HSDP, and the fallback attention's
score matrices."""

from __future__ import annotations

from plan_testing import FOUR_RANKS

from microcoder.learner.models.memory_plan import (
    ModelShape,
    host_per_node,
    plan_learner,
    qwen25_shape,
)

SHAPE = ModelShape.from_config({"model_type": "qwen2", **qwen25_shape("1.5b")})
KW = FOUR_RANKS
WINDOWED = ModelShape.from_config(
    {
        "model_type": "mistral",
        **qwen25_shape("0.5b"),
        "sliding_window": 4096,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
    }
)


def test_a_sequence_longer_than_the_micro_batch_is_planned_as_its_own_bin() -> None:
    short = plan_learner(SHAPE, **KW, longest_sequence=4096)
    long = plan_learner(SHAPE, **KW, longest_sequence=30000)
    assert (short.tokens, long.tokens) == (8192, 30000)
    assert long.activations > 3 * short.activations


def test_sequence_parallel_holds_a_share_of_the_tokens_plus_all_to_all_buffers() -> None:
    one = plan_learner(SHAPE, **KW, longest_sequence=32768)
    four = plan_learner(SHAPE, **KW, longest_sequence=32768, sequence_parallel=4)
    assert four.tokens == 8192 and four.sp_buffers > 0 and one.sp_buffers == 0
    assert four.activations < one.activations / 3
    assert (four.params, four.optimizer) == (one.params, one.optimizer)


def test_offload_optimizer_moves_the_moments_to_the_host() -> None:
    none = plan_learner(SHAPE, **KW)
    off = plan_learner(SHAPE, **KW, offload="optimizer")
    assert off.optimizer == 0 and off.host == none.optimizer
    assert off.params == none.params and off.peak() < none.peak()


def test_offload_params_keeps_only_the_computing_groups_on_the_device() -> None:
    none = plan_learner(SHAPE, **KW)
    off = plan_learner(SHAPE, **KW, offload="params")
    p = SHAPE.params()
    assert off.host == 20 * p // 4  # fp32 params, grads, moments and the host step's temporary
    assert off.params < none.params / 2 and off.optimizer == 0 and off.optimizer_temp == 0


def test_hsdp_shards_over_the_ranks_of_one_replica() -> None:
    flat = plan_learner(SHAPE, **{**KW, "world_size": 8})
    hsdp = plan_learner(SHAPE, **{**KW, "world_size": 8}, replicas=2)
    four = plan_learner(SHAPE, **KW)
    assert (hsdp.params, hsdp.optimizer) == (four.params, four.optimizer)
    assert hsdp.params == 2 * flat.params


def test_host_per_node_counts_every_rank_on_it_and_the_published_copy() -> None:
    off = plan_learner(SHAPE, **KW, offload="optimizer")
    assert host_per_node(off, 4) == 4 * off.host + 2 * SHAPE.params()


def test_window_scores_count_only_without_flash_and_when_the_window_bites() -> None:
    kw = {**KW, "longest_sequence": 16384}
    varlen = plan_learner(WINDOWED, **kw, kernel="varlen")
    flash = plan_learner(WINDOWED, **kw, kernel="flash")
    short = plan_learner(WINDOWED, **{**KW, "longest_sequence": 2048}, kernel="varlen")
    assert flash.attention_scores == 0 and short.attention_scores == 0
    # 16 heads x 16384² elements: fp32 softmax and bf16 probabilities kept, 8 B more held
    assert varlen.attention_scores == 16 * 16384 * 16384 * (4 + 2) + 16 * 16384**2 * (2 * 2 + 4)
    head = flash.logprob_head + flash.head_grad_chunks  # what the recompute may replace at the peak
    assert varlen.backward_peak() - flash.backward_peak() >= varlen.attention_scores - head


def test_window_scores_without_checkpointing_are_kept_on_every_windowed_layer() -> None:
    kw = {**KW, "longest_sequence": 8192, "activation_checkpointing": False}
    varlen = plan_learner(WINDOWED, **kw, kernel="varlen")
    flash = plan_learner(WINDOWED, **kw, kernel="flash")
    kept = 16 * 8192 * 8192 * 6
    extra = varlen.activations_no_ckpt - flash.activations_no_ckpt
    assert extra == (WINDOWED.layers - 1) * kept + varlen.attention_scores


def test_sequence_parallel_splits_the_score_heads() -> None:
    kw = {**KW, "longest_sequence": 16384, "kernel": "varlen"}
    one = plan_learner(WINDOWED, **kw)
    two = plan_learner(WINDOWED, **kw, sequence_parallel=2)
    assert two.attention_scores * 2 == one.attention_scores


def test_offloaded_moments_stream_a_bucket_or_one_larger_shard_at_a_time() -> None:
    # 0.5B on 1 rank: its 136 M-element embedding's moments (1.09 GB) are larger than a bucket
    small = ModelShape.from_config({"model_type": "qwen2", **qwen25_shape("0.5b")})
    off = plan_learner(small, **{**KW, "world_size": 1}, offload="optimizer")
    assert off.optimizer_temp == 8 * 151936 * 896 * 3 // 2
    # the same on 64 ranks: one 512 MiB bucket of moments and AdamW's temporary for it
    wide = plan_learner(small, **{**KW, "world_size": 64}, offload="optimizer")
    assert wide.optimizer_temp == min(8 * small.params() // 64, 512 * 2**20) * 3 // 2

"""The learner settings the memory-plan tests plan under (tests/gpu_path/test_memory_plan.py,
test_memory_plan_parallel.py): `plan_learner`'s keywords for four ranks, bf16, 8k-token micro
batches, 1k-token log-prob chunks, activation checkpointing on."""

from __future__ import annotations

FOUR_RANKS = dict(
    world_size=4,
    compute_bytes=2,
    micro_batch_tokens=8192,
    logprob_chunk_tokens=1024,
    activation_checkpointing=True,
)

"""The generator's memory plan: what one vLLM engine's GPU holds, from config.json alone.

Pure python (standard library only), like learner/models/memory_plan.py. A generator holds its
weights (every expert of a mixture-of-experts model: vLLM keeps them all) split over its
tensor-parallel ranks and gives what is left of `gpu_memory_utilization`, after the weights and
its activation reserve, to the KV cache, counted in sequences of the longest length the run can
produce (max_prompt_tokens + max_response_tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

from microcoder.learner.models.model_shape import ModelShape

GiB = 2**30

VLLM_ACTIVATION_RESERVE = 2 * GiB
"""What a vLLM engine keeps out of its budget besides weights and KV cache (profiled activation
peak, sampler, CUDA graphs): an allowance; vLLM measures the real figure when it starts."""


def kv_bytes_per_token(shape: ModelShape, tensor_parallel: int, dtype_bytes: int) -> int:
    """KV cache bytes per token on one tensor-parallel rank, all layers: keys and values of its
    KV heads (vLLM replicates a KV head when TP > kv_heads), or multi-head latent attention's one
    compressed latent and rope key per layer (DeepSeek; not split by TP)."""
    if any(shape.mla):
        _, kv_rank, _, rope, _ = shape.mla
        return shape.layers * (kv_rank + rope) * dtype_bytes
    kv_heads = max(1, shape.kv_heads // max(1, tensor_parallel))
    return 2 * shape.layers * kv_heads * shape.head_dim * dtype_bytes


@dataclass(frozen=True)
class GeneratorPlan:
    """Bytes one generator engine's GPU (one tensor-parallel rank) holds, and what they allow."""

    weights: int
    """This TP rank's share of the weights in the serving dtype."""
    budget: int
    """gpu_memory_utilization of the GPU's memory."""
    reserve: int
    """Activation peak allowance (VLLM_ACTIVATION_RESERVE)."""
    kv_cache: int
    """What is left for the KV cache (negative when the weights do not fit)."""
    kv_bytes_per_token: int
    """KV cache bytes per token on this rank (all layers, keys and values)."""
    sequence_tokens: int
    """Tokens of one sequence at its longest: max_prompt_tokens + max_response_tokens."""

    @property
    def sequences(self) -> int:
        """Sequences of sequence_tokens the KV cache holds at once."""
        return max(0, self.kv_cache) // (self.kv_bytes_per_token * self.sequence_tokens)


def plan_generator(
    shape: ModelShape,
    *,
    tensor_parallel: int,
    dtype_bytes: int,
    gpu_bytes: int,
    gpu_memory_utilization: float,
    max_prompt_tokens: int,
    max_response_tokens: int,
) -> GeneratorPlan:
    """The bytes of one generator GPU: weights / TP, the reserve, and the KV cache that is left."""
    tp = max(1, tensor_parallel)
    weights = shape.params() * dtype_bytes // tp
    budget = int(gpu_bytes * gpu_memory_utilization)
    per_token = kv_bytes_per_token(shape, tp, dtype_bytes)
    return GeneratorPlan(
        weights=weights,
        budget=budget,
        reserve=VLLM_ACTIVATION_RESERVE,
        kv_cache=budget - weights - VLLM_ACTIVATION_RESERVE,
        kv_bytes_per_token=per_token,
        sequence_tokens=max_prompt_tokens + max_response_tokens,
    )

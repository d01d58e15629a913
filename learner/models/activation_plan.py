"""What a learner rank's activations take: bytes per token and decoder layer, and the attention
score matrices the fallback kernel makes. Pure python (standard library only), the counting
under learner/models/memory_plan.py's `plan_learner`.

The micro-batch a rank computes is the packed bin, at most `micro_batch_tokens`, except that a
sequence longer than that gets a bin of its own (learner/packing.py: `pack_bins`): the plan sizes
`max(micro_batch_tokens, longest sequence)` tokens, split over the sequence-parallel group.

Attention kernels (`ATTENTION_KERNELS`): flash-attn (varlen, sliding window and soft-cap in the
kernel) and plain SDPA on CUDA keep no [L, L] scores. microcoder's varlen attention
(learner/attention.py) runs SDPA per packed sequence, except on a layer whose sliding window is
shorter than the sequence or whose logits are soft-capped: `_windowed` computes the scores of
each sequence explicitly, [heads, L, L] per layer, keeps the fp32 softmax (and the bf16
probabilities and tanh output on a bf16 step) for backward, and holds a few more such blocks
while it runs. "eager" (transformers' eager attention) does so on every layer.
"""

from __future__ import annotations

from microcoder.learner.models.model_shape import ModelShape

ATTENTION_KERNELS = ("flash", "varlen", "eager")
"""The kernels the plan knows: flash_attention_2, microcoder's SDPA-based varlen attention
(what `learner.attn_implementation = "auto"` picks without flash-attn), transformers' eager."""


def norm_bytes(hidden: int, compute_bytes: int) -> int:
    """Bytes per token an RMSNorm keeps for backward: transformers' RMSNorm runs in fp32 (input
    upcast, normalised values) and casts back before the weight (both kept on a bf16 step)."""
    if compute_bytes >= 4:
        return 2 * 4 * hidden  # normalised values and the output; the input is the residual
    return 2 * 4 * hidden + 2 * compute_bytes * hidden


def mlp_activation_bytes(shape: ModelShape, compute_bytes: int, sparse: bool) -> int:
    """Bytes per token a layer's MLP keeps for backward. Dense: gate, up, act(gate), the product
    (a plain MLP: up and act(up)). Sparse (transformers' expert loop): per routed copy of the
    token, its gathered input, gate and up, act(gate), the product and the expert's output; the
    router's logits and fp32 probabilities; the shared experts as a dense MLP."""
    b = compute_bytes
    if not sparse:
        return (4 if shape.gated_mlp else 2) * shape.intermediate * b
    routed = shape.experts_per_token * (2 * shape.hidden + 4 * shape.expert_intermediate) * b
    router = shape.experts * (b + 4)
    shared = 4 * shape.shared_intermediate * b + (shape.hidden * b if shape.shared_gate else 0)
    return routed + router + shared


def layer_activation_bytes(shape: ModelShape, compute_bytes: int, sparse: bool = False) -> int:
    """Bytes per token one decoder layer keeps for backward without checkpointing: its input, its
    norms, q k v, q k after RoPE, the attention output (as SDPA returns it and as o_proj reads
    it), the residual after attention, and the MLP's (`mlp_activation_bytes`)."""
    h = shape.hidden
    q = shape.q_width
    kv = shape.kv_width
    values = h + (q + 2 * kv) + (q + kv) + 2 * q + h
    norms = shape.layer_norms * norm_bytes(h, compute_bytes)
    return values * compute_bytes + norms + mlp_activation_bytes(shape, compute_bytes, sparse)


def layers_activation_bytes(shape: ModelShape, compute_bytes: int) -> tuple[int, int]:
    """(all layers, the largest layer): bytes per token without checkpointing."""
    dense = layer_activation_bytes(shape, compute_bytes)
    sparse = layer_activation_bytes(shape, compute_bytes, sparse=True)
    total = shape.dense_layers * dense + shape.moe_layers * sparse
    largest = max(sparse if shape.moe_layers else 0, dense if shape.dense_layers else 0)
    return total, largest


def score_layers(shape: ModelShape, kernel: str, longest: int) -> int:
    """Decoder layers whose attention scores exist as [heads, L, L] blocks under `kernel` for
    sequences of up to `longest` tokens."""
    if kernel == "eager":
        return shape.layers
    if kernel != "varlen":
        return 0
    if shape.attn_softcap:
        return shape.layers
    if shape.sliding_window and shape.sliding_window < longest:
        return shape.window_layers
    return 0


def score_elements(shape: ModelShape, bin_tokens: int, longest: int, sequence_parallel: int) -> int:
    """Score elements of one layer over one micro-batch on one rank: Σ n² over its sequences is at
    most bin_tokens × longest (sequences of at most `longest` filling the bin); under sequence
    parallelism a rank computes whole sequences for 1/N of the heads."""
    heads = -(-shape.heads // sequence_parallel)
    return heads * bin_tokens * min(longest, bin_tokens)


def score_bytes(shape: ModelShape, compute_bytes: int) -> tuple[int, int]:
    """(kept for backward, held besides while one layer runs) bytes per score element: the fp32
    softmax, the probabilities in the compute dtype and the soft-cap's tanh output are kept; the
    raw and masked scores and the fp32 copy are held while the layer runs."""
    b = compute_bytes
    kept = 4 + (b if b < 4 else 0) + (b if shape.attn_softcap else 0)
    return kept, 2 * b + 4

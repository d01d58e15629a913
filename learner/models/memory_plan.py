"""The memory plan: what one learner rank and one generator need on a GPU, from config.json alone.

Pure python (standard library only, no torch, no pydantic), so `microcoder launch --dry-run`
and the first stage of scripts/gpu-check.sh can import it on any machine. The launch side
(launch/run/memory_check.py) turns a run's config into these inputs and refuses a plan that does not
fit; this module only counts bytes.

What a learner rank holds (FSDP2 full shard over W ranks, fp32 master weights, AdamW):
- model states, sharded: fp32 params 4 B, fp32 gradients 4 B, AdamW's two moments 8 B per
  parameter, each / W;
- while a group computes, its unsharded parameters in the compute dtype: the root group
  (embeddings, head, final norm), which FSDP2 keeps unsharded over the whole step, and two decoder
  layers (the one running and the one prefetched);
- activations saved for backward, per token and layer (`layer_activation_bytes`); with
  activation checkpointing only each layer's input, plus one layer recomputed in backward;
- the log-prob head: `logprob_chunk_tokens` rows (or every token when chunking is off) of
  LOGIT_BLOCKS fp32 [rows, vocab] blocks, plus the bf16 logits on a bf16 step; and the head's
  unsharded gradient (compute dtype, and its fp32 copy for the reduce when they differ);
- when gradient accumulation keeps unsharded gradients (FSDP2 without gradient sync on the
  micro-batches before the last, `set_requires_gradient_sync(False)`), a full fp32 gradient of
  the whole model on every rank: `grad_accumulation_unsharded`;
- the optimizer step: AdamW(foreach) makes one temporary the size of the local shard;
- the publish: each tensor is gathered in fp32 and cast to the compute dtype on the device, one
  at a time (the largest, the embedding, counts), into one host copy on rank 0 (host memory).

The peak is the larger of the backward phase and the optimizer phase. In the backward phase,
without checkpointing, the head's blocks meet every saved activation, and the gradients, made
as the activations are freed, count as the larger of the two; with checkpointing, the head
runs before any layer is recomputed, and the first layer is recomputed last, beside every
other gradient. The per-token counts were checked
against measured CPU peaks (bench/learner_memory.py --plan, notes/issue-31-h3.md).

A generator (vLLM) holds its weights split over its tensor-parallel ranks and gives what is left
of `gpu_memory_utilization` after weights and its activation reserve to the KV cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GiB = 2**30

LOGIT_BLOCKS = 5
"""fp32 [rows, vocab] blocks alive at once in the log-prob head (logits / T, log_softmax, its
exp and product for the entropy, and the gradient): 5.02 measured (notes/bench-learner-memory.md)."""

VLLM_ACTIVATION_RESERVE = 2 * GiB
"""What a vLLM engine keeps out of its budget besides weights and KV cache (profiled activation
peak, sampler, CUDA graphs): an allowance; vLLM measures the real figure when it starts."""


QWEN2_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
)
"""The config.json fields of a Qwen2 shape, in the order of QWEN25_SHAPES' rows."""

QWEN25_SHAPES = {
    # name: hidden, intermediate, layers, heads, kv heads, vocab, tied embeddings
    "0.5b": (896, 4864, 24, 14, 2, 151936, True),
    "1.5b": (1536, 8960, 28, 12, 2, 151936, True),
    "7b": (3584, 18944, 28, 28, 4, 152064, False),
}
"""Public Qwen2.5(-Coder) shapes (config.json numbers): the benches', gpu-check's and the tests'
reference models, built with random weights."""


def qwen25_shape(name: str) -> dict:
    """The config.json fields (QWEN2_FIELDS) of the public Qwen2.5 model `name` (QWEN25_SHAPES)."""
    return dict(zip(QWEN2_FIELDS, QWEN25_SHAPES[name], strict=True))


class ShapeError(ValueError):
    """config.json is missing or does not describe a decoder-only transformer we can count."""


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer (Qwen2/Qwen3/Llama layout) that memory depends on."""

    hidden: int
    """Hidden size H."""
    layers: int
    """Decoder layers."""
    heads: int
    """Attention (query) heads."""
    kv_heads: int
    """Key/value heads (GQA)."""
    head_dim: int
    """Per-head width."""
    intermediate: int
    """MLP width I (gate, up: H -> I; down: I -> H)."""
    vocab: int
    """Vocabulary size V."""
    tied: bool
    """LM head shares the embedding matrix."""
    qkv_bias: bool = True
    """q/k/v projections have a bias (Qwen2 yes, Qwen3 and Llama no)."""
    qk_norm: bool = False
    """Per-head RMSNorm on q and k (Qwen3)."""

    @classmethod
    def from_config(cls, cfg: dict) -> ModelShape:
        """From a Hugging Face config.json's fields (Qwen2, Qwen3, Llama and alike)."""
        need = [
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "vocab_size",
        ]
        missing = [k for k in need if k not in cfg]
        if missing:
            raise ShapeError(
                f"config.json has no {', '.join(missing)}: the memory plan counts decoder-only "
                "transformers (Qwen2, Qwen3, Llama); pass the model's own config.json"
            )
        heads = int(cfg["num_attention_heads"])
        kind = cfg.get("model_type", "")
        return cls(
            hidden=int(cfg["hidden_size"]),
            layers=int(cfg["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
            intermediate=int(cfg["intermediate_size"]),
            vocab=int(cfg["vocab_size"]),
            tied=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(cfg.get("attention_bias", kind == "qwen2")),
            qk_norm=kind == "qwen3",
        )

    @classmethod
    def from_folder(cls, folder: str | Path) -> ModelShape:
        """From `folder`/config.json; no weights are read."""
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise ShapeError(
                f"{path} does not exist: the memory plan needs only the model's config.json; put "
                f"the model folder at {folder}, or just its config.json (e.g. from the model's "
                "Hub page: Files > config.json) to plan before downloading the weights"
            )
        return cls.from_config(json.loads(path.read_text()))

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        """Parameters of one decoder layer."""
        h, q, kv, i = self.hidden, self.q_width, self.kv_width, self.intermediate
        attn = h * q + 2 * h * kv + q * h + (q + 2 * kv if self.qkv_bias else 0)
        norms = 2 * h + (2 * self.head_dim if self.qk_norm else 0)
        return attn + 3 * h * i + norms

    def root_params(self) -> int:
        """Parameters outside the decoder layers: embeddings, final norm, untied head."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def params(self) -> int:
        return self.layers * self.layer_params() + self.root_params()


def norm_bytes(hidden: int, compute_bytes: int) -> int:
    """Bytes per token an RMSNorm keeps for backward: transformers' RMSNorm runs in fp32 (input
    upcast, normalised values) and casts back before the weight (both kept on a bf16 step)."""
    if compute_bytes >= 4:
        return 2 * 4 * hidden  # normalised values and the output; the input is the residual
    return 2 * 4 * hidden + 2 * compute_bytes * hidden


def layer_activation_bytes(shape: ModelShape, compute_bytes: int) -> int:
    """Bytes per token one decoder layer keeps for backward without checkpointing: its input, the
    two norms, q k v, q k after RoPE, the attention output (as SDPA returns it and as o_proj reads
    it), the residual after attention, and the MLP's gate, up, act(gate) and act(gate)*up."""
    h, q, kv, i = shape.hidden, shape.q_width, shape.kv_width, shape.intermediate
    values = h + (q + 2 * kv) + (q + kv) + 2 * q + h + 4 * i
    return values * compute_bytes + 2 * norm_bytes(h, compute_bytes)


@dataclass(frozen=True)
class LearnerPlan:
    """Bytes one learner rank needs at its peak, by part (all per rank)."""

    params: int
    grads: int
    optimizer: int
    unsharded_params: int
    """Root group over the step plus two decoder layers, compute dtype."""
    unsharded_grads: int
    """The head's unsharded gradient (plus its fp32 reduce copy on a bf16 step), alive from the
    head's backward to the root's reduce-scatter at the end of the backward."""
    head_grad_chunks: int
    """One more [V, H] gradient while the chunks' head gradients add up (the head's backward
    only; 0 when chunking is off)."""
    accumulated_grads: int
    """Full fp32 gradients kept unsharded between micro-batches (0 when they stay sharded)."""
    activations: int
    """Saved activations of one micro-batch at the chosen checkpointing."""
    activations_no_ckpt: int
    activations_ckpt: int
    """With checkpointing: the saved layer inputs (and what lies outside the layers) plus
    `recompute`."""
    recompute: int
    """One decoder layer's activations, recomputed in backward (checkpointing only)."""
    checkpointing: bool
    logprob_head: int
    """The head's logit blocks: one chunk, or every token when chunking is off."""
    optimizer_temp: int
    """AdamW(foreach)'s temporary the size of the shard, during the optimizer step."""
    publish_device: int
    """The largest tensor while the full weights are published: gathered in fp32 on the device
    and cast to the compute dtype there (learner/distributed.py: full_state_dict)."""
    publish_host: int
    """Host memory of rank 0's one copy of the published weights, in the compute dtype (not
    GPU memory; learner.dtype is the serving dtype)."""
    reference: int
    """The frozen reference model's shard and unsharded root when kl_coef > 0."""

    def backward_step(self) -> int:
        """The backward phase above what the rank holds between steps: the activations (or the
        gradients that replace them, the larger), the head's logits and unsharded buffers."""
        if self.checkpointing:
            # The head's backward runs before any layer is recomputed, and the first layer is
            # recomputed last, when every other gradient exists.
            saved = self.activations_ckpt - self.recompute
            head = self.logprob_head + self.head_grad_chunks
            transient = saved + max(head, self.recompute + self.grads)
        else:
            transient = max(self.activations, self.grads) + self.logprob_head
            transient += self.head_grad_chunks
        return transient + self.unsharded_params + self.unsharded_grads

    def backward_peak(self) -> int:
        resident = self.params + self.optimizer + self.accumulated_grads + self.reference
        return resident + self.backward_step()

    def optimizer_peak(self) -> int:
        states = self.params + self.grads + self.optimizer + self.optimizer_temp
        return states + self.accumulated_grads + self.reference

    def peak(self) -> int:
        """Bytes at the rank's peak: the backward, the optimizer step or the publish."""
        publish = self.params + self.optimizer + self.reference + self.publish_device
        return max(self.backward_peak(), self.optimizer_peak(), publish)

    def step_peak(self) -> int:
        """A first step's peak over the memory before it (AdamW allocates its moments in it):
        what bench memory-plan measures."""
        return max(self.backward_step(), self.optimizer_peak() - self.params - self.reference)


def plan_learner(
    shape: ModelShape,
    *,
    world_size: int,
    compute_bytes: int,
    micro_batch_tokens: int,
    logprob_chunk_tokens: int,
    activation_checkpointing: bool,
    grad_accumulation_unsharded: bool = False,
    reference_model: bool = False,
) -> LearnerPlan:
    """The bytes of one learner rank (see the module docstring for what is counted)."""
    p, w, b, t = shape.params(), world_size, compute_bytes, micro_batch_tokens
    root, layer = shape.root_params(), shape.layer_params()
    per_layer = layer_activation_bytes(shape, b)
    # Outside the layers: the final norm, the final hidden states and the rows gathered for the head.
    outside = t * (norm_bytes(shape.hidden, b) + 2 * b * shape.hidden)
    no_ckpt = t * shape.layers * per_layer + outside
    ckpt = t * (shape.layers * shape.hidden * b + per_layer) + outside
    rows = min(logprob_chunk_tokens, t) if logprob_chunk_tokens > 0 else t
    head = rows * shape.vocab * (LOGIT_BLOCKS * 4 + (b if b < 4 else 0))
    head_grad = shape.vocab * shape.hidden * (b + (4 if b < 4 else 0))
    unsharded = root * b + 2 * layer * b
    reference = (4 * p // w + root * b) if reference_model else 0
    return LearnerPlan(
        params=4 * p // w,
        grads=4 * p // w,
        optimizer=8 * p // w,
        unsharded_params=unsharded,
        unsharded_grads=head_grad,
        head_grad_chunks=shape.vocab * shape.hidden * b if logprob_chunk_tokens > 0 else 0,
        accumulated_grads=4 * p if grad_accumulation_unsharded else 0,
        activations=ckpt if activation_checkpointing else no_ckpt,
        activations_no_ckpt=no_ckpt,
        activations_ckpt=ckpt,
        recompute=t * per_layer,
        checkpointing=activation_checkpointing,
        logprob_head=head,
        optimizer_temp=4 * p // w,
        publish_device=shape.vocab * shape.hidden * (4 + (b if b < 4 else 0)),
        publish_host=b * p,
        reference=reference,
    )


def largest_fitting(key: str, room: int, shape: ModelShape, limit: int, **kwargs) -> int:
    """The largest value of the integer argument `key` of plan_learner (micro_batch_tokens in
    steps of 256, or world_size) up to `limit` whose plan fits in `room` bytes, when the plan
    grows with it; the smallest such value when it shrinks (world_size). 0 = none fits."""
    step = 256 if key == "micro_batch_tokens" else 1

    def fits(n: int) -> bool:
        return plan_learner(shape, **{**kwargs, key: n * step}).peak() <= room

    if key == "world_size":
        return next((n for n in range(1, limit + 1) if fits(n)), 0)
    lo, hi = 0, limit // step  # fits(lo) holds (or lo is 0), the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo * step


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
    kv_heads = max(1, shape.kv_heads // tp)  # vLLM replicates a KV head when TP > kv_heads
    per_token = 2 * shape.layers * kv_heads * shape.head_dim * dtype_bytes
    return GeneratorPlan(
        weights=weights,
        budget=budget,
        reserve=VLLM_ACTIVATION_RESERVE,
        kv_cache=budget - weights - VLLM_ACTIVATION_RESERVE,
        kv_bytes_per_token=per_token,
        sequence_tokens=max_prompt_tokens + max_response_tokens,
    )

"""The memory plan: what one learner rank needs on a GPU and in host memory, from config.json alone.

Pure python (standard library only, no torch, no pydantic), so `microcoder launch --dry-run`
and the first stage of scripts/gpu-check.sh can import it on any machine. The launch side
(launch/run/memory_check.py) turns a run's config into these inputs and refuses a plan that does
not fit; this module only counts bytes. The model's shape is learner/models/model_shape.py's,
the activations learner/models/activation_plan.py's, the generator learner/models/generator_plan.py's.

What a learner rank holds (FSDP2 over S = world_size / replicas shard ranks; HSDP keeps one such
shard group per replica), fp32 master weights, AdamW:
- model states, sharded: fp32 params 4 B, fp32 gradients 4 B, AdamW's two moments 8 B per
  parameter, each / S. `offload = "optimizer"` keeps the moments in host memory (the step
  streams them through the device, OFFLOAD_BUCKET_BYTES of moments, or one larger shard's, at a
  time); `offload = "params"` keeps
  all three in host memory (FSDP2 CPU offload, the step on the host), and the device holds only
  what a group computes with;
- while a group computes, its unsharded parameters in the compute dtype: the root group
  (embeddings, head, final norm), which FSDP2 keeps unsharded over the whole step, and two decoder
  layers (the one running and the one prefetched);
- activations saved for backward of the micro-batch the rank computes (activation_plan.py: the
  packed bin, at least the longest sequence, / sequence_parallel), per token and layer; with
  activation checkpointing only each layer's input, plus one layer recomputed in backward; the
  fallback attention's score matrices; under sequence parallelism the all-to-all buffers around
  attention (q, k, v in and out);
- the log-prob head: `logprob_chunk_tokens` rows (or every token when chunking is off) of
  LOGIT_BLOCKS fp32 [rows, vocab] blocks, plus the bf16 logits on a bf16 step; and the head's
  unsharded gradient (compute dtype, and its fp32 copy for the reduce when they differ);
- when gradient accumulation keeps unsharded gradients (FSDP2 without gradient sync on the
  micro-batches before the last, `set_requires_gradient_sync(False)`), a full fp32 gradient of
  the whole model on every rank: `grad_accumulation_unsharded`;
- the optimizer step: AdamW(foreach) makes one temporary the size of the local shard;
- the publish: each tensor is gathered in fp32 and cast to the compute dtype on the device, one
  at a time (the largest, the embedding, counts), into one host copy on rank 0 (host memory).

Under LoRA (learner.lora: `lora_rank` > 0) the base is frozen in the compute dtype and only the
adapters train (learner/lora/adapters.py): the shards hold the base at compute_bytes per parameter plus
the adapters' fp32 masters; gradients, AdamW moments, the optimizer temporary, the unsharded
layer gradient and accumulated gradients count the adapters alone; the head is frozen, so no
head gradient; each adapted projection saves its rank-wide A output (and, with dropout, its
dropped input) per token; the publish sends the adapters only (fp32). The adapter count
(`lora_param_count`) is rank × (in + out) per targeted projection, from the config's hidden,
intermediate, heads, kv heads and head_dim, in every layer for the attention projections and in
the dense layers only for gate/up/down: on a MoE layer those are experts, which the config
refuses as targets (learner/models/families.py: lora_errors), and the router is never one.

The peak is the larger of the backward phase and the optimizer phase. In the backward phase,
without checkpointing, the head's blocks meet every saved activation, and the gradients, made
as the activations are freed, count as the larger of the two; with checkpointing, the head
runs before any layer is recomputed, and the first layer is recomputed last, beside every
other gradient. The per-token counts were checked against measured CPU peaks
(bench/learner_memory.py --plan, notes/issue-31-h3.md, notes/issue-44-h42.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from microcoder.learner.models.activation_plan import (  # noqa: F401  (public names)
    ATTENTION_KERNELS,
    layer_activation_bytes,
    layers_activation_bytes,
    norm_bytes,
    score_bytes,
    score_elements,
    score_layers,
)
from microcoder.learner.models.generator_plan import (  # noqa: F401  (public names)
    VLLM_ACTIVATION_RESERVE,
    GeneratorPlan,
    plan_generator,
)
from microcoder.learner.models.model_shape import (  # noqa: F401  (public names)
    QWEN2_FIELDS,
    QWEN25_SHAPES,
    ModelShape,
    ShapeError,
    qwen25_shape,
)

GiB = 2**30

FEEDBACK_PARTS = 4
"""The parts of a `repair` feedback each cut to environment.feedback_chars characters (the
failing input, the expected and the actual output, stderr: actors/environments/repair.py)."""
FEEDBACK_OVERHEAD_TOKENS = 256
"""The rest of one feedback, planned: the verdict line and the fixed wording around the parts,
the cut markers, the chat template's end of the assistant turn, the user message's header and
the next assistant header."""


def feedback_tokens(feedback_chars: int) -> int:
    """The tokens one feedback between two turns is planned at: each of FEEDBACK_PARTS parts at
    `feedback_chars` characters, a token per character (a byte-level BPE makes at most one per
    byte, and program input and output is ASCII mostly), plus FEEDBACK_OVERHEAD_TOKENS. A user
    environment's feedback (`module:Class`) is planned the same; its own may be longer."""
    return FEEDBACK_PARTS * feedback_chars + FEEDBACK_OVERHEAD_TOKENS


def trajectory_tokens(
    max_prompt_tokens: int, max_response_tokens: int, max_turns: int = 1, feedback_chars: int = 0
) -> int:
    """The longest sequence of a run: the prompt, then `max_turns` model turns of
    `max_response_tokens` each with a feedback (`feedback_tokens(feedback_chars)`) between two;
    a single turn's is max_prompt_tokens + max_response_tokens. The learner trains on the whole
    trajectory as one sequence, and the generator's last turn continues all of it."""
    turns = max(1, max_turns)
    return (
        max_prompt_tokens
        + turns * max_response_tokens
        + (turns - 1) * feedback_tokens(feedback_chars)
    )


LOGIT_BLOCKS = 5
"""fp32 [rows, vocab] blocks alive at once in the log-prob head (logits / T, log_softmax, its
exp and product for the entropy, and the gradient): 5.02 measured (notes/bench-learner-memory.md)."""

OFFLOADS = ("none", "optimizer", "params")
"""learner.offload's values (learner/config.py)."""

OFFLOAD_BUCKET_BYTES = 512 * 2**20
"""Moments streamed to the device per AdamW bucket with offload = "optimizer" (learner/offload.py:
BUCKET_BYTES)."""


@dataclass(frozen=True)
class LearnerPlan:
    """Bytes one learner rank needs at its peak, by part (all per rank, on the device unless
    the name says host)."""

    params: int
    grads: int
    optimizer: int
    unsharded_params: int
    """Root group over the step plus two decoder layers, compute dtype."""
    unsharded_grads: int
    """The head's unsharded gradient (plus its fp32 reduce copy on a bf16 step), alive from the
    head's backward to the root's reduce-scatter at the end of the backward."""
    layer_grad: int
    """One decoder layer's unsharded gradient while it is reduce-scattered (compute dtype, and
    its fp32 reduce-scatter input on a bf16 step): a whole mixture-of-experts layer's is GiBs."""
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
    """One decoder layer's activations, recomputed in backward (checkpointing only), with its
    attention scores and all-to-all buffers."""
    checkpointing: bool
    logprob_head: int
    """The head's logit blocks: one chunk, or every token when chunking is off."""
    optimizer_temp: int
    """The optimizer step's temporaries on the device: AdamW(foreach)'s one the size of the
    shard; with the moments offloaded, one bucket of streamed moments and its temporary."""
    publish_device: int
    """The largest tensor while the full weights are published: gathered in fp32 on the device
    and cast to the compute dtype there (learner/distributed.py: full_state_dict)."""
    publish_host: int
    """Host memory of rank 0's one copy of the published weights, in the compute dtype (not
    GPU memory; learner.dtype is the serving dtype)."""
    reference: int
    """The frozen reference model's shard and unsharded root when kl_coef > 0."""
    tokens: int = 0
    """Tokens of the micro-batch this rank computes: max(micro_batch_tokens, the longest
    sequence), / sequence_parallel."""
    attention_scores: int = 0
    """Score matrices of the fallback attention on one layer (kept and transient); counted in
    `recompute`, and for every such layer in `activations_no_ckpt`."""
    sp_buffers: int = 0
    """The all-to-all buffers around one layer's attention (sequence parallelism)."""
    kernel: str = "flash"
    """The attention kernel assumed (activation_plan.ATTENTION_KERNELS)."""
    offload: str = "none"
    host: int = 0
    """Host memory of this rank's offloaded states (and the host step's temporary)."""
    lora_params: int = 0
    """Adapter parameters under LoRA (all ranks together); 0 = full fine-tuning."""

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
        return transient + self.unsharded_params + self.unsharded_grads + self.layer_grad

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


def largest_tensor(shape: ModelShape) -> int:
    """Elements of the model's largest parameter: the embedding, or a fused expert tensor
    (transformers keeps a layer's experts' gate and up projections as one [E, 2 I, H])."""
    fused = shape.experts * (2 if shape.gated_mlp else 1) * shape.expert_intermediate * shape.hidden
    return max(shape.vocab * shape.hidden, fused)


def lora_shapes(shape: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each projection LoRA can target, per decoder layer."""
    h = shape.hidden
    i = shape.intermediate
    return {
        "q_proj": (h, shape.q_width),
        "k_proj": (h, shape.kv_width),
        "v_proj": (h, shape.kv_width),
        "o_proj": (shape.q_width, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
"""LoRA targets of the MLP: present in dense layers only (module docstring)."""


def lora_layer_params(shape: ModelShape, rank: int, targets: tuple[str, ...]) -> int:
    """Adapter parameters of one (dense) decoder layer: rank × (in + out) per target."""
    dims = lora_shapes(shape)
    return sum(rank * sum(dims[t]) for t in targets if t in dims)


def lora_param_count(shape: ModelShape, rank: int, targets: tuple[str, ...]) -> int:
    """Adapter parameters of the whole model: the attention targets in every layer, the MLP
    ones in the dense layers (module docstring)."""
    attention = tuple(t for t in targets if t not in MLP_TARGETS)
    mlp = tuple(t for t in targets if t in MLP_TARGETS)
    every = shape.layers * lora_layer_params(shape, rank, attention)
    return every + shape.dense_layers * lora_layer_params(shape, rank, mlp)


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
    longest_sequence: int = 0,
    sequence_parallel: int = 1,
    offload: str = "none",
    replicas: int = 1,
    kernel: str = "flash",
    lora_rank: int = 0,
    lora_targets: tuple[str, ...] = (),
    lora_dropout: bool = False,
) -> LearnerPlan:
    """The bytes of one learner rank (see the module docstring for what is counted);
    `lora_rank` > 0: LoRA on `lora_targets`, `lora_dropout` when its dropout is above 0."""
    if offload not in OFFLOADS or kernel not in ATTENTION_KERNELS:
        raise ValueError(f"offload must be one of {OFFLOADS} and kernel one of {ATTENTION_KERNELS}")
    p = shape.params()
    b = compute_bytes
    sp = max(1, sequence_parallel)
    s = max(1, world_size // max(1, replicas))  # the ranks one copy of the states is sharded over
    bin_tokens = max(micro_batch_tokens, longest_sequence)
    longest = longest_sequence or bin_tokens
    t = -(-bin_tokens // sp)
    root = shape.root_params()
    layer = shape.layer_params()
    all_layers, per_layer = layers_activation_bytes(shape, b)
    kept, held = score_bytes(shape, b)
    elements = score_elements(shape, bin_tokens, longest, sp)
    n_scored = score_layers(shape, kernel, longest)
    # Kept for backward over every sequence; held besides while the longest one's block runs.
    scores = elements * kept + -(-shape.heads // sp) * longest**2 * held if n_scored else 0
    a2a = 2 * (2 * shape.q_width + 2 * shape.kv_width) * t * b if sp > 1 else 0
    # Outside the layers: the final norm, the final hidden states and the rows gathered for the head.
    outside = t * (norm_bytes(shape.hidden, b) + 2 * b * shape.hidden)
    no_ckpt = t * all_layers + outside + max(0, n_scored - 1) * elements * kept + scores + a2a
    recompute = t * per_layer + scores + a2a
    ckpt = t * shape.layers * shape.hidden * b + outside + recompute
    rows = min(logprob_chunk_tokens, t) if logprob_chunk_tokens > 0 else t
    head = rows * shape.vocab * (LOGIT_BLOCKS * 4 + (b if b < 4 else 0))
    head_grad = shape.vocab * shape.hidden * (b + (4 if b < 4 else 0))
    unsharded = root * b + 2 * layer * b
    reference = (4 * p // s + root * b) if reference_model else 0
    states = {"params": 4 * p // s, "grads": 4 * p // s, "optimizer": 8 * p // s}
    temp = 4 * p // s
    trained = lora_param_count(shape, lora_rank, tuple(lora_targets)) if lora_rank else p
    lora = _lora_terms(shape, lora_rank, tuple(lora_targets), lora_dropout, b, s, t)
    if lora_rank:
        states = {"params": (b * p + 4 * trained) // s, "grads": 4 * trained // s}
        states["optimizer"] = 8 * trained // s
        temp = 4 * trained // s
        no_ckpt += lora["activations"]
        recompute += lora["layer_activations"]
        ckpt += lora["layer_activations"]
        unsharded += 2 * lora["layer"] * b
    host = 0
    if offload == "optimizer":
        host = states["optimizer"]
        states["optimizer"] = 0
        # The step streams the moments through the device a bucket at a time (a shard larger
        # than a bucket is a bucket of its own), with AdamW's temporary for the bucket: half again.
        bucket = max(OFFLOAD_BUCKET_BYTES, 8 * -(-largest_tensor(shape) // s))
        temp = min(8 * trained // s, bucket) * 3 // 2
    elif offload == "params":
        host = sum(states.values()) + temp  # the step runs on the host
        # The device keeps the fp32 shards of the groups it computes with (copied in before the
        # all-gather) and one layer's gradient shard before it goes to the host.
        master = b if lora_rank else 4  # under LoRA the base shards are in the compute dtype
        states = {"params": master * (root + 2 * layer) // s, "optimizer": 0}
        states["grads"] = 4 * (lora["layer"] if lora_rank else layer) // s
        temp = 0
    return LearnerPlan(
        **states,
        unsharded_params=unsharded,
        unsharded_grads=0 if lora_rank else head_grad,
        layer_grad=(lora["layer"] if lora_rank else layer) * (b + (4 if b < 4 else 0)),
        head_grad_chunks=(
            shape.vocab * shape.hidden * b if logprob_chunk_tokens > 0 and not lora_rank else 0
        ),
        accumulated_grads=4 * trained if grad_accumulation_unsharded else 0,
        activations=ckpt if activation_checkpointing else no_ckpt,
        activations_no_ckpt=no_ckpt,
        activations_ckpt=ckpt,
        recompute=recompute,
        checkpointing=activation_checkpointing,
        logprob_head=head,
        optimizer_temp=temp,
        publish_device=lora["publish"] or shape.vocab * shape.hidden * (4 + (b if b < 4 else 0)),
        publish_host=4 * trained if lora_rank else b * p,
        reference=reference,
        tokens=t,
        attention_scores=scores,
        sp_buffers=a2a,
        kernel=kernel,
        offload=offload,
        host=host,
        lora_params=trained if lora_rank else 0,
    )


def _lora_terms(
    shape: ModelShape, rank: int, targets: tuple[str, ...], dropout: bool, b: int, s: int, t: int
) -> dict[str, int]:
    """LoRA's own bytes (module docstring): "layer" = one layer's adapter parameters,
    "layer_activations" / "activations" = what the adapters save for backward in one layer / in
    every layer of `t` tokens, "publish" = the largest adapter tensor gathered in fp32."""
    if not rank:
        return {"layer": 0, "layer_activations": 0, "activations": 0, "publish": 0}
    dims = lora_shapes(shape)
    hit = [t_ for t_ in targets if t_ in dims]
    per_token = sum(rank + (dims[x][0] if dropout else 0) for x in hit) * b
    return {
        "layer": lora_layer_params(shape, rank, tuple(hit)),
        "layer_activations": t * per_token,
        "activations": t * per_token * shape.layers,
        "publish": 4 * rank * max(max(dims[x]) for x in hit) if hit else 0,
    }


def host_per_node(plan: LearnerPlan, ranks_per_node: int) -> int:
    """Host memory the learner takes on its fullest node: each rank's offloaded states, and
    rank 0's published copy of the weights."""
    return ranks_per_node * plan.host + plan.publish_host


def largest_fitting(key: str, room: int, shape: ModelShape, limit: int, **kwargs) -> int:
    """The largest value of the integer argument `key` of plan_learner (micro_batch_tokens in
    steps of 256, or world_size) up to `limit` whose plan fits in `room` bytes, when the plan
    grows with it; the smallest such value when it shrinks (world_size). 0 = none fits."""
    step = 256 if key == "micro_batch_tokens" else 1

    def fits(n: int) -> bool:
        return plan_learner(shape, **{**kwargs, key: n * step}).peak() <= room

    if key == "world_size":
        return next((n for n in range(1, limit + 1) if fits(n)), 0)
    lo = 0
    hi = limit // step  # fits(lo) holds (or lo is 0), the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo * step


CHECKPOINT_WRITE_BYTES_PER_S = 2e9
"""The write bandwidth one node is assumed to reach on the run's shared filesystem while a
checkpoint is written: 2 GB/s, a middle figure for one client of a parallel filesystem (Lustre,
GPFS, Weka, a cloud filestore) over a 25-100 Gb/s link, which sustains about 1-5 GB/s of large
sequential writes per node. Slower storage (NFS over 10 GbE: about 1 GB/s) doubles the time."""


@dataclass(frozen=True)
class SavePlan:
    """An asynchronous checkpoint (learner/checkpoint.py: start_save) at the recipe's size."""

    snapshot_host: int
    """Host memory on rank 0's node while a save is in flight: its ranks' staged shards of the
    fp32 masters and AdamW moments, plus rank 0's one copy of the weights in the serving dtype."""
    total: int
    """Bytes one checkpoint writes: the DCP shards (12 bytes a parameter) and the HF folder."""
    seconds: float
    """Estimated time of the background write: rank 0's node writes its shards and the HF
    folder at CHECKPOINT_WRITE_BYTES_PER_S; the other nodes write less, at the same time."""


def plan_save(
    shape: ModelShape,
    world_size: int,
    serving_bytes: int,
    ranks_per_node: int,
    replicas: int = 1,
    lora_params: int = 0,
) -> SavePlan:
    """The host snapshot, bytes and estimated seconds of one checkpoint. Under learner.lora
    (`lora_params` > 0) only the adapters have fp32 masters and AdamW state, and their fp32
    adapter folder comes beside the base's HF weights."""
    p = shape.params()
    trained = lora_params or p
    s = max(1, world_size // max(1, replicas))
    shard = 12 * trained // s  # fp32 masters + AdamW exp_avg + exp_avg_sq, this rank's shard
    files = serving_bytes * p + 4 * lora_params  # the HF folder (and the adapter folder)
    node0 = min(ranks_per_node, world_size) * shard + files
    return SavePlan(node0, 12 * trained + files, node0 / CHECKPOINT_WRITE_BYTES_PER_S)

"""Ulysses sequence parallelism (`learner.sequence_parallel = N`): a packed micro-batch split
along the sequence over N consecutive ranks of the learner group, with an all-to-all over the
attention heads around attention.

The learner group of W ranks is cut into W / N SP groups of consecutive ranks ([0..N-1],
[N..2N-1], ...; `SequenceParallel.build`, one `dist.new_group` each, so the groups compose with
an HSDP mesh whose shard dimension holds consecutive ranks). Packing balances the batch over the
W / N data-parallel groups (learner/packing.py: plan_micro_batches with world = W / N); every
rank of an SP group collates the same micro-batches and keeps its 1/N slice of each packed row
(`shard`): the row is padded to a multiple of N (the pad is one more sequence, so no real token
sees it), rank r keeps tokens [r·L/N, (r+1)·L/N) with their own position_ids (RoPE is applied
on each rank's own tokens before attention) and scores only the targets whose logits are in its
slice, so the ranks' losses sum to the micro-batch's loss. The sequence boundaries (varlen plan,
cu_seq_lens) stay those of the whole row.

Around attention (`attention`, registered under the kernel's own name by `wrap_kernel`, so
transformers' flash_attention_2 and learner/attention.py's kernel are wrapped alike) the
autograd-aware all-to-all turns q/k/v [1, H, L/N, D] into [1, H/N, L, D]: each rank attends
over whole sequences for its heads, so a layer's sliding window and soft-cap hold as without
SP; the output [1, L, H/N, D] goes back to [1, L/N, H, D]. Grouped-query attention: the key/
value heads are split when N divides them, else each is repeated N / gcd(Hkv, N) times first
(more all-to-all traffic, the same result); the query heads must divide by N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.nn.functional import all_to_all_single

from microcoder.learner.algorithm.loss_names import SEQUENCE_LEVEL
from microcoder.learner.packing import MicroBatch

KWARG = "sequence_parallel"
"""The model's keyword argument that carries the SP group to the attention (learner/forward.py)."""


@dataclass(frozen=True)
class SequenceParallel:
    """This rank's place in the sequence-parallel layout of the learner group."""

    size: int
    """N: ranks that split one micro-batch (1 = off)."""
    rank: int
    """This rank's index in its SP group: it keeps slice `rank` of each packed row."""
    dp_rank: int
    """Index of this rank's SP group: the data-parallel share of the batch it trains on."""
    dp_size: int
    """Data-parallel groups (world / N): packing balances the batch over these."""
    group: Any = None
    """The SP group's torch.distributed process group (None when size = 1)."""

    @classmethod
    def build(cls, size: int, rank: int, world: int) -> SequenceParallel:
        """Collective over the whole learner group (every rank creates every SP group, in
        order): the layout of `rank` in a group of `world` ranks with SP groups of `size`."""
        if world % size:
            raise ValueError(
                f"learner.sequence_parallel = {size} does not divide the {world} learner ranks; "
                "set learner.world_size to a multiple of it"
            )
        if size == 1:
            return cls(1, 0, rank, world)
        mine = None
        for first in range(0, world, size):
            group = dist.new_group(list(range(first, first + size)))
            if first <= rank < first + size:
                mine = group
        return cls(size, rank % size, rank // size, world // size, mine)


def model_errors(
    config: Any, size: int, packing: bool = True, off_policy: str = "tis", policy_loss: str = "clip"
) -> list[str]:
    """Why a model cannot train with sequence parallelism `size` ([] when it can), each naming
    what to change. `config`: a transformers config, the config.json dict, or None (the heads
    not known yet: not checked)."""
    if size == 1:
        return []
    errors = []
    get = config.get if isinstance(config, dict) else lambda k: getattr(config, k)
    heads = size if config is None else int(get("num_attention_heads"))
    if heads % size:
        errors.append(
            f"learner.sequence_parallel = {size} does not divide the model's {heads} attention "
            "heads (each SP rank attends with heads / N of them); choose a sequence_parallel "
            f"that divides {heads}"
        )
    if not packing:
        errors.append(
            "sequence parallelism splits a packed row; set learner.packing = true (or "
            "learner.sequence_parallel = 1)"
        )
    if off_policy in ("seq-tis", "geo-reject"):
        errors.append(
            f'algorithm.off_policy = "{off_policy}" weighs a whole sequence by all its tokens, '
            "which sequence parallelism puts on several ranks; use a token-level correction "
            '("tis" or "mask") or learner.sequence_parallel = 1'
        )
    if policy_loss in SEQUENCE_LEVEL:
        errors.append(
            f'algorithm.policy_loss = "{policy_loss}" takes one ratio per sequence from all its '
            "tokens, which sequence parallelism puts on several ranks; use a token-level loss "
            '("clip", "dual-clip" or "cispo") or learner.sequence_parallel = 1'
        )
    return errors


def shard(mb: MicroBatch, sp: SequenceParallel) -> MicroBatch:
    """This rank's slice of the packed micro-batch `mb` (host or device tensors).

    Input [1, L] ids and position_ids become [1, ceil(L / N)] (the row padded to a multiple of
    N with one pad sequence); the [n] per-target tensors keep the n' targets whose predicting
    logit lies in the slice, their `logit_index` made slice-local (none: one zero-weight dummy
    target, as an empty micro-batch has). `cu_seq_lens`, `seq_lens` and `max_len` describe the
    whole padded row; `tokens` counts the real tokens of the slice (the step's sums add them)."""
    if sp.size == 1:
        return mb
    if not mb.packed:
        raise ValueError("sequence parallelism needs packed micro-batches: learner.packing = true")
    length = mb.input_ids.shape[1]
    pad = -length % sp.size
    ids = mb.input_ids
    pos = mb.position_ids
    lens = mb.seq_lens
    if pad:
        ids = torch.cat([ids, ids.new_zeros(1, pad)], dim=1)
        pos = torch.cat([pos, torch.arange(pad, device=pos.device).unsqueeze(0)], dim=1)
        lens = (*lens, pad)
    per = (length + pad) // sp.size
    lo = sp.rank * per
    hi = (sp.rank + 1) * per
    keep = (mb.logit_index >= lo) & (mb.logit_index < hi)
    per_target = ("targets", "temperature", "behaviour_logp", "advantages", "weight", "seq_index")
    if mb.loss_mask is not None:  # a multi-turn trajectory's mask splits with its tokens
        per_target += ("loss_mask",)
    picked = {k: getattr(mb, k)[keep] for k in per_target}
    logit_index = mb.logit_index[keep] - lo
    if not bool(keep.any()):
        logit_index = torch.zeros_like(mb.logit_index[:1])
        picked = {k: _dummy_target(k, v) for k, v in picked.items()}
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return replace(
        mb,
        input_ids=ids[:, lo:hi],
        position_ids=pos[:, lo:hi],
        cu_seq_lens=cu.to(mb.cu_seq_lens.device),
        max_len=max(mb.max_len, pad),
        logit_index=logit_index,
        tokens=max(0, min(hi, mb.tokens) - lo),
        seq_lens=tuple(lens),
        **picked,
    )


def _dummy_target(name: str, empty: torch.Tensor) -> torch.Tensor:
    """One target of a zero-weight dummy (as packing.py's empty micro-batch holds)."""
    value = {"temperature": 1.0, "seq_index": -1}.get(name, 0)
    return torch.full((1,), value, dtype=empty.dtype, device=empty.device)


def heads_to_sequence(x: torch.Tensor, sp: SequenceParallel) -> torch.Tensor:
    """[1, h, L/N, D] (all heads, this rank's tokens) -> [1, h/N, L, D] (heads slice `rank`,
    every token). Autograd-aware: the backward is the reverse all-to-all."""

    n = sp.size
    (_, h, local, d) = x.shape
    send = x[0].reshape(n, h // n, local, d).contiguous()  # chunk j: head slice j, to rank j
    got = all_to_all_single(torch.empty_like(send), send, group=sp.group)  # chunk s from rank s
    return got.transpose(0, 1).reshape(1, h // n, n * local, d)


def sequence_to_heads(x: torch.Tensor, sp: SequenceParallel) -> torch.Tensor:
    """[1, L, h/N, D] (every token, heads slice `rank`) -> [1, L/N, h, D] (this rank's tokens,
    all heads). Autograd-aware: the backward is the reverse all-to-all."""

    n = sp.size
    (_, length, hs, d) = x.shape
    send = x[0].reshape(n, length // n, hs, d).contiguous()  # chunk j: rank j's tokens
    got = all_to_all_single(torch.empty_like(send), send, group=sp.group)  # chunk s: heads of s
    return got.transpose(0, 1).reshape(1, length // n, n * hs, d)


def _repeat_kv(x: torch.Tensor, size: int) -> torch.Tensor:  # [1, Hkv, L/N, D] -> [1, Hkv·r, ..]
    """Key/value heads repeated so that N divides them, each query head keeping its kv head."""
    kv = x.shape[1]
    r = size // math.gcd(kv, size)
    return x if r == 1 else x.repeat_interleave(r, dim=1)


def wrap_kernel(name: str) -> str:
    """Re-register the attention kernel `name` (transformers' AttentionInterface) as itself
    wrapped by `attention`: unchanged unless the model call passes `sequence_parallel`.
    Idempotent; returns `name`."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner = ALL_ATTENTION_FUNCTIONS[name]
    if getattr(inner, "_microcoder_sp", False):
        return name

    def wrapped(module, query, key, value, attention_mask, *args, **kwargs):
        return attention(inner, module, query, key, value, attention_mask, *args, **kwargs)

    wrapped._microcoder_sp = True
    AttentionInterface.register(name, wrapped)
    return name


def attention(inner, module, query, key, value, attention_mask, *args, **kwargs):
    """`inner`(module, q, k, v, mask, ...) -> ([1, L, H, D], weights) with the SP all-to-all
    around it when kwargs carry a `SequenceParallel` of size > 1: query [1, H, L/N, D] and key/
    value [1, Hkv, L/N, D] come from this rank's tokens, the kernel sees [1, H/N, L, D] and the
    whole row's boundaries (cu_seq_lens / varlen plan), the result is [1, L/N, H, D]."""
    sp = kwargs.pop(KWARG, None)
    if sp is None or sp.size == 1:
        return inner(module, query, key, value, attention_mask, *args, **kwargs)
    if attention_mask is not None:
        raise ValueError(
            "sequence parallelism takes packed rows without an attention mask; set "
            "learner.packing = true"
        )
    kwargs.pop("position_ids", None)  # this rank's slice only: the kernel uses cu_seq_lens
    key = _repeat_kv(key, sp.size)
    value = _repeat_kv(value, sp.size)
    q, k, v = (heads_to_sequence(t, sp) for t in (query, key, value))
    out, weights = inner(module, q, k, v, None, *args, **kwargs)
    return sequence_to_heads(out, sp), weights


def setup(learner: Any, algorithm: Any, model_config: Any, attn: str) -> SequenceParallel:
    """The learner's SP layout (collective: every rank of the group calls it, after
    init_distributed and the model's load), from `learner` (LearnerConfig: sequence_parallel,
    packing) and `algorithm` (AlgorithmConfig: off_policy, policy_loss). Refuses a model or config SP cannot
    run (ValueError naming what to change) and wraps the attention kernel `attn`
    (learner/attention.py: choose) with the all-to-all."""
    size = learner.sequence_parallel
    errors = model_errors(
        model_config, size, learner.packing, algorithm.off_policy, algorithm.policy_loss
    )
    if errors:
        raise ValueError("; ".join(errors))
    world = dist.get_world_size() if dist.is_initialized() else 1
    sp = SequenceParallel.build(size, dist.get_rank() if world > 1 else 0, world)
    if size > 1:
        wrap_kernel(attn)
    return sp


def sequence_count(sp: SequenceParallel, seq_index: torch.Tensor) -> int:
    """Sequences a micro-batch's targets index (max + 1 of `seq_index`, [n'] long), the same on
    every rank of the SP group: a slice may hold only some of them (one all-reduce over the group
    when N > 1, one host sync). For callers that do not pass the mini-batch's count."""
    top = seq_index.max().reshape(1)
    if sp.size > 1:
        dist.all_reduce(top, op=dist.ReduceOp.MAX, group=sp.group)
    return int(top) + 1


def agree_on_dropped(
    sp: SequenceParallel,
    seq_index: torch.Tensor,  # [n'] long: each of this slice's targets' sequence (-1: dummy)
    keep: torch.Tensor,  # [n'] bool: this slice's tokens the non-finite guard keeps
    bad: torch.Tensor,  # [S] bool: sequences the guard dropped from this slice's tokens
) -> tuple[torch.Tensor, torch.Tensor]:  # ([n'] keep, [S] bad)
    """The non-finite guard (off_policy.finite_sequences) across the split: a sequence one rank
    of the SP group drops is dropped by every rank (one all-reduce over the group per
    micro-batch). `bad` comes back on the group's rank 0 only, so the step's sum counts each
    dropped sequence once."""
    if sp.size == 1:
        return keep, bad
    every = bad.to(torch.int32)
    dist.all_reduce(every, op=dist.ReduceOp.MAX, group=sp.group)
    every = every.bool()
    if every.numel():
        keep = keep & ~(every[seq_index.clamp(min=0)] & (seq_index >= 0))
    return keep, every if sp.rank == 0 else torch.zeros_like(every)

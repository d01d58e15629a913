"""Varlen causal attention for packed sequences on any device (no flash-attn needed).

Registered with transformers' AttentionInterface as "microcoder_varlen". A packed row holds
several sequences; no token may attend across them. The sequence boundaries come as a
`VarlenPlan` (keyword `varlen`), built once per micro-batch on the host from the lengths the
collate already knows (`plan(seq_lens, device)`), so no layer copies anything from the device
to the host. The plan groups consecutive sequences into buckets of near-equal length (a
packed row is longest-first: learner/packing.py packs first-fit decreasing): a bucket of one
sequence is one causal SDPA call on its slice; a bucket of several is gathered into right-
padded rows and run as ONE causal SDPA call (right padding needs no mask: a real token never
sees a later pad), at most `WASTE` times the attention work of its sequences alone. Fewer
calls per layer (kernel launches on CUDA), no block-diagonal mask.

Without a plan but with `cu_seq_lens_q` (the keyword flash-attention-2 takes) the plan is made
from it in the layer (one host sync per layer: for callers outside the learner). Without either
(right-padded rows) it runs SDPA causally on each row: with right padding the real tokens never
see a pad, so no mask is needed. No mask function is registered for this name, so transformers
builds none.

On CUDA with flash-attn installed (`pip install microcoder[flash]`), `choose("auto")` picks
transformers' "flash_attention_2" instead: it calls `flash_attn_varlen_func` with the same
`cu_seq_lens_q/k` and the int `max_length_q/k` the learner passes (no host sync either).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

NAME = "microcoder_varlen"

WASTE = 1.25
"""A bucket of several sequences may cost at most this × their own attention work (Σ n²) and
token slots (Σ n) once right-padded to its longest."""


@dataclass(frozen=True)
class Bucket:
    """Consecutive sequences of a packed row run by one SDPA call."""

    rows: int
    """Sequences in it."""
    longest: int
    """Its longest sequence: the padded row width."""
    gather: torch.Tensor | None
    """[rows·longest] long: the bucket-local token each padded slot reads (None: one sequence)."""
    keep: torch.Tensor | None
    """[tokens] long: the padded slot of each real token, in packed order (None: one sequence)."""


@dataclass(frozen=True)
class VarlenPlan:
    """Buckets of a packed row, with their index tensors already on the compute device."""

    widths: tuple[int, ...]
    """Tokens of each bucket, in packed order (they sum to the row's length)."""
    buckets: tuple[Bucket, ...]


def plan(seq_lens: Sequence[int], device: torch.device | str, waste: float = WASTE) -> VarlenPlan:
    """The plan for a packed row of sequences of `seq_lens` tokens (host ints), its index
    tensors moved to `device` once. `waste` = 1 groups only sequences of equal length."""
    groups: list[list[int]] = []
    for n in (int(x) for x in seq_lens if x):
        if groups:
            g = groups[-1]
            longest = max(max(g), n)
            rows = len(g) + 1
            squares = sum(x * x for x in g) + n * n
            if rows * longest * longest <= waste * squares and rows * longest <= waste * (
                sum(g) + n
            ):
                g.append(n)
                continue
        groups.append([n])
    buckets = []
    for g in groups:
        if len(g) == 1:
            buckets.append(Bucket(1, g[0], None, None))
            continue
        longest = max(g)
        gather = []
        keep = []
        start = 0
        for row, n in enumerate(g):
            gather += [*range(start, start + n), *([start] * (longest - n))]
            keep += range(row * longest, row * longest + n)
            start += n
        buckets.append(
            Bucket(
                len(g),
                longest,
                torch.tensor(gather, dtype=torch.long).to(device),
                torch.tensor(keep, dtype=torch.long).to(device),
            )
        )
    return VarlenPlan(tuple(sum(g) for g in groups), tuple(buckets))


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [B, H, L, D]
    key: torch.Tensor,  # [B, Hkv, L, D]
    value: torch.Tensor,  # [B, Hkv, L, D]
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,  # [k + 1] int boundaries of the packed sequences
    varlen: VarlenPlan | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    s_aux: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:  # ([B, L, H, D], no weights)
    """Causal attention per packed sequence (or per padded row); see the module docstring.

    A layer's `sliding_window` (Mistral, Gemma-2, Qwen with use_sliding_window: a query sees
    only its last `sliding_window` keys, itself included) and `softcap` (Gemma-2's attention
    logit soft-capping, softcap·tanh(scores / softcap)) are honoured (`_windowed`). Attention
    sinks (`s_aux`, gpt-oss) are refused: learner/models/families.py refuses such models before launch.
    """
    if s_aux is not None:
        raise NotImplementedError(
            "attention sinks (s_aux) are not supported by the learner's varlen attention; "
            "this model family is refused by `microcoder model check` (learner/models/families.py)"
        )
    gqa = query.shape[1] != key.shape[1]

    def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        window_bites = sliding_window is not None and sliding_window < q.shape[2]
        if window_bites or softcap is not None:
            return _windowed(q, k, v, dropout, scaling, sliding_window, softcap)
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=gqa
        )

    if varlen is None and cu_seq_lens_q is not None:
        bounds = cu_seq_lens_q.tolist()  # a host sync: the learner passes `varlen` instead
        varlen = plan([b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)], query.device)
    if varlen is None:
        out = sdpa(query, key, value)
    else:
        if query.shape[0] != 1:
            raise ValueError(
                f"varlen attention takes one packed row, got {query.shape[0]}: pack the "
                "sequences into one row (learner.packing = true) or pass no cu_seq_lens_q"
            )
        # split (not slicing): its backward is one cat, where per-slice backward would write a
        # full-size zero gradient for every bucket.
        parts = zip(*(t.split(varlen.widths, dim=2) for t in (query, key, value)), strict=True)
        out = torch.cat(
            [_bucket(b, q, k, v, sdpa) for b, (q, k, v) in zip(varlen.buckets, parts, strict=True)],
            dim=2,
        )
    return out.transpose(1, 2).contiguous(), None


def _bucket(b: Bucket, q, k, v, sdpa) -> torch.Tensor:  # [1, H, tokens, D]
    """One SDPA call for a bucket: its slice as is, or its sequences as right-padded rows."""
    if b.gather is None:
        return sdpa(q, k, v)

    def rows(t: torch.Tensor) -> torch.Tensor:  # [1, h, tokens, D] -> [rows, h, longest, D]
        return t.index_select(2, b.gather).unflatten(2, (b.rows, b.longest))[0].transpose(0, 1)

    out = sdpa(rows(q), rows(k), rows(v))  # [rows, H, longest, D]
    return out.transpose(0, 1).flatten(1, 2).index_select(1, b.keep).unsqueeze(0)


def _windowed(
    q: torch.Tensor,  # [B, H, L, D]
    k: torch.Tensor,  # [B, Hkv, L, D]
    v: torch.Tensor,  # [B, Hkv, L, D]
    dropout: float,
    scaling: float | None,
    window: int | None,
    softcap: float | None,
) -> torch.Tensor:  # [B, H, L, D]
    """Causal attention with a sliding window (key j visible to query i iff 0 <= i - j < window,
    transformers' rule) and/or logit soft-capping, the scores computed explicitly (softcap
    applies before the mask and softmax, as in Gemma-2's eager attention)."""
    length = q.shape[2]
    if k.shape[1] != q.shape[1]:  # grouped-query attention: each kv head serves H / Hkv heads
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scale = q.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # [B, H, L, L]
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    pos = torch.arange(length, device=q.device)
    back = pos[:, None] - pos[None, :]  # i - j
    allowed = back >= 0
    if window is not None:
        allowed = allowed & (back < window)
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    probs = F.dropout(probs, p=dropout, training=dropout > 0)
    return torch.matmul(probs, v)


def register() -> str:
    """Register the kernel with transformers (idempotent) and return its name."""
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, varlen_attention)
    return NAME


def flash_available() -> bool:
    """Whether flash-attn (the `flash` extra) imports here."""
    try:
        from flash_attn import flash_attn_varlen_func  # noqa: F401
    except (ImportError, OSError):  # absent, or built for another torch/CUDA
        return False
    return True


def choose(requested: str, device: torch.device) -> str:
    """Resolve `learner.attn_implementation`: auto = flash_attention_2 on CUDA when flash-attn
    is installed (`pip install microcoder[flash]`), else this module's SDPA kernel."""
    if requested != "auto":
        return register() if requested == NAME else requested
    if device.type == "cuda" and flash_available():
        return "flash_attention_2"
    return register()

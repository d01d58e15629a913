"""Varlen causal attention for packed sequences on any device (no flash-attn needed).

Registered with transformers' AttentionInterface as "microcoder_varlen". With `cu_seq_lens_q`
(the packed-sequence boundaries, the same keyword flash-attention-2 takes) it runs SDPA causally
on each sequence of the packed row separately, so no token attends across sequences and no
compute is spent on a block-diagonal mask. Without it (right-padded rows) it runs SDPA causally
on each row: with right padding the real tokens never see a pad, so no mask is needed either.
No mask function is registered for this name, so transformers builds none.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NAME = "microcoder_varlen"


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [B, H, L, D]
    key: torch.Tensor,  # [B, Hkv, L, D]
    value: torch.Tensor,  # [B, Hkv, L, D]
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,  # [k + 1] int boundaries of the packed sequences
    **kwargs,
) -> tuple[torch.Tensor, None]:  # ([B, L, H, D], no weights)
    """Causal attention per packed sequence (or per padded row); see the module docstring."""
    gqa = query.shape[1] != key.shape[1]

    def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=gqa
        )

    if cu_seq_lens_q is None:
        out = sdpa(query, key, value)
    else:
        # split (not slicing): its backward is one cat, where per-slice backward would write a
        # full-size zero gradient for every sequence.
        bounds = cu_seq_lens_q.tolist()
        sizes = [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        qs, ks, vs = (t.split(sizes, dim=2) for t in (query, key, value))
        out = torch.cat(
            [sdpa(q, k, v) for q, k, v in zip(qs, ks, vs, strict=True) if q.shape[2]], dim=2
        )
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Register the kernel with transformers (idempotent) and return its name."""
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, varlen_attention)
    return NAME


def choose(requested: str, device: torch.device) -> str:
    """Resolve `learner.attn_implementation`: auto = flash_attention_2 on CUDA if installed."""
    if requested != "auto":
        return register() if requested == NAME else requested
    if device.type == "cuda":
        try:
            import flash_attn  # noqa: F401

            return "flash_attention_2"
        except ImportError:
            pass
    return register()

"""Off-policy corrections and the mismatch between the generators' and the learner's log-probs.

Every response is sampled by a behaviour policy (vLLM, up to `buffer.max_staleness` versions
old, with its own kernels and precision) and trained on by the learner. Per response token t of
sequence s, with the log ratio

    δ_t = log pi_old(o_t) − log pi_behaviour(o_t),     ρ_t = exp(δ_t),     C = algorithm.tis_cap

(pi_old: the learner's weights at the start of the step, recomputed by the learner), each
correction (`algorithm.off_policy`, one pure function each, registered once in OFF_POLICY)
gives every token an importance weight w_t that multiplies its clipped surrogate
(learner/algorithm/grpo.py: token_loss):

    tis         w_t = min(ρ_t, C)                                   token-level TIS (the default)
    seq-tis     w_t = min(Π_{u∈s} ρ_u, C) = min(exp(Σ_{u∈s} δ_u), C)   one weight per sequence
    mask        w_t = ρ_t if 1/C ≤ ρ_t ≤ C, else 0 (dropped)         IcePop-style token mask
    geo-reject  w_t = 0 (dropped) if g_s ∉ [1/C, C], else 1;  g_s = exp(mean_{u∈s} δ_u)
    none        w_t = 1

No weight carries a gradient. A dropped token contributes nothing to the loss; it still counts in
the aggregation's denominators (as a token whose advantage is zero would). A multi-turn
trajectory's feedback tokens are no tokens here at all: the trainer gives them the dummy's
sequence index −1, so no sum over a sequence (seq-tis, geo-reject) reads them, and they count
in no denominator (learner/trainer.py `_loss_and_stats`, learner/batch.py `model_lens`).

The mismatch metrics (`mismatch_sums` per micro-batch, summed over micro-batches and ranks,
then `mismatch_metrics`) describe Δ_t = log pi_learner(o_t) − log pi_behaviour(o_t) per
response token, overall and per staleness (learner version − the response's policy version).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch


class Correction(NamedTuple):
    """One correction's per-token result (all [T])."""

    weight: torch.Tensor  # float, detached: w_t, 0 where dropped
    dropped: torch.Tensor  # bool: the correction took this token out of the loss
    capped: torch.Tensor  # bool: the weight hit the cap C (tis, seq-tis)


def segment_sum(
    values: torch.Tensor,  # [T] float
    seq_index: torch.Tensor,  # [T] long in [0, S); −1 = a dummy token (its own slot, ignored)
    num_seqs: int,  # S
) -> torch.Tensor:  # [S] float64: Σ of each sequence's tokens
    """Per-sequence sums, computed on the device with no host sync."""
    slot = torch.where(seq_index < 0, num_seqs, seq_index)
    out = torch.zeros(num_seqs + 1, dtype=torch.float64, device=values.device)
    return out.index_add_(0, slot, values.double())[:num_seqs]


def per_token(seq_values: torch.Tensor, seq_index: torch.Tensor) -> torch.Tensor:  # [T]
    """A per-sequence value at each token (a dummy token gets 0)."""
    padded = torch.cat([seq_values, seq_values.new_zeros(1)])
    return padded[torch.where(seq_index < 0, len(seq_values), seq_index)]


def _none(log_ratio: torch.Tensor, seq_index: torch.Tensor, num_seqs: int, cap: float):
    """w_t = 1: no correction (the clipped ratio pi_theta / pi_old alone)."""
    no = torch.zeros_like(log_ratio, dtype=torch.bool)
    return Correction(torch.ones_like(log_ratio), no, no)


def _tis(log_ratio: torch.Tensor, seq_index: torch.Tensor, num_seqs: int, cap: float):
    """Token-level truncated IS: w_t = min(ρ_t, C), ρ_t = exp(δ_t)."""
    w = torch.exp(log_ratio.detach()).clamp(max=cap)
    return Correction(w, torch.zeros_like(w, dtype=torch.bool), w >= cap)


def _seq_tis(log_ratio: torch.Tensor, seq_index: torch.Tensor, num_seqs: int, cap: float):
    """Sequence-level truncated IS: every token of s gets w_s = min(exp(Σ_{u∈s} δ_u), C)
    (the product of the sequence's token ratios, truncated; computed in log space, so a long
    sequence cannot overflow). On one-token sequences it equals `tis`."""
    total = segment_sum(log_ratio.detach(), seq_index, num_seqs)  # [S]
    log_w = per_token(total, seq_index).clamp(max=math.log(cap))
    w = torch.exp(log_w).to(log_ratio.dtype)
    return Correction(w, torch.zeros_like(w, dtype=torch.bool), log_w >= math.log(cap))


def _mask(log_ratio: torch.Tensor, seq_index: torch.Tensor, num_seqs: int, cap: float):
    """IcePop-style token mask: w_t = ρ_t inside the band 1/C ≤ ρ_t ≤ C, else 0 (dropped).
    Inside the band it equals `tis` (ρ_t ≤ C there, so nothing is capped)."""
    ratio = torch.exp(log_ratio.detach())
    out = outside_band(log_ratio, cap)
    w = torch.where(out, torch.zeros_like(ratio), ratio)
    return Correction(w, out, torch.zeros_like(out))


def _geo_reject(log_ratio: torch.Tensor, seq_index: torch.Tensor, num_seqs: int, cap: float):
    """Geometric-mean rejection: sequence s is rejected (every token dropped, w = 0) when
    g_s = exp(mean_{u∈s} δ_u) leaves [1/C, C]; an accepted sequence keeps w = 1."""
    d = log_ratio.detach()
    total = segment_sum(d, seq_index, num_seqs)
    count = segment_sum(torch.ones_like(d), seq_index, num_seqs).clamp(min=1)
    mean = per_token(total / count, seq_index)  # [T] log g_s at each token
    rejected = mean.abs() > math.log(cap)
    w = torch.where(rejected, torch.zeros_like(d), torch.ones_like(d))
    return Correction(w, rejected, torch.zeros_like(rejected))


CorrectionFn = Callable[[torch.Tensor, torch.Tensor, int, float], Correction]
OFF_POLICY: dict[str, CorrectionFn] = {
    "none": _none,
    "tis": _tis,
    "seq-tis": _seq_tis,
    "mask": _mask,
    "geo-reject": _geo_reject,
}
"""The corrections (algorithm.off_policy): name -> f(log_ratio [T] = log pi_old − log
pi_behaviour, seq_index [T], num_seqs, cap C) -> Correction."""


def describe(mode: str) -> str:
    """What correction `mode` does, in one line: its function's docstring up to the first
    period (for `microcoder compare`'s arm list)."""
    doc = " ".join((OFF_POLICY[mode].__doc__ or mode).split())
    return doc.split(". ")[0].rstrip(".")


def correct(
    mode: str,
    log_ratio: torch.Tensor,  # [T] log pi_old − log pi_behaviour (finite)
    seq_index: torch.Tensor,  # [T] long, −1 = dummy
    num_seqs: int,
    cap: float,
) -> Correction:
    """The weights of correction `mode` (OFF_POLICY) for one micro-batch's tokens."""
    if mode not in OFF_POLICY:
        raise ValueError(
            f"unknown off-policy correction '{mode}'; choose one of {sorted(OFF_POLICY)}"
        )
    return OFF_POLICY[mode](log_ratio, seq_index, num_seqs, cap)


def outside_band(log_ratio: torch.Tensor, cap: float) -> torch.Tensor:  # [T] bool
    """ρ_t = exp(δ_t) outside [1/C, C], i.e. |δ_t| > log C (the band of `mask` and `geo-reject`,
    the one the mismatch metrics count)."""
    return log_ratio.detach().abs() > math.log(cap)


def finite_sequences(
    seq_index: torch.Tensor,  # [T] long, −1 = dummy
    num_seqs: int,
    *logps: torch.Tensor,  # each [T]
) -> tuple[torch.Tensor, torch.Tensor]:  # ([T] bool keep, [S] bool bad sequence)
    """The guard: a sequence with a non-finite log-prob at any token in any of `logps` is dropped
    whole. Returns the tokens to keep and the sequences dropped (no host sync)."""
    bad_tok = torch.zeros_like(seq_index, dtype=torch.bool)
    for lp in logps:
        bad_tok |= ~torch.isfinite(lp.detach())
    bad_seq = segment_sum(bad_tok.double(), seq_index, num_seqs) > 0
    return ~(per_token(bad_seq.double(), seq_index) > 0) & ~bad_tok, bad_seq


def whole_sequences(
    mask: torch.Tensor,  # [T] bool
    real: torch.Tensor,  # [T] bool: tokens that count
    seq_index: torch.Tensor,
    num_seqs: int,
) -> torch.Tensor:  # [S] bool
    """The sequences every real token of which is in `mask` (sequences with no real token: no)."""
    count = segment_sum(real.double(), seq_index, num_seqs)
    return (segment_sum((mask & real).double(), seq_index, num_seqs) == count) & (count > 0)

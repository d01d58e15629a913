"""The sums one learner step accumulates per micro-batch, and the metrics made of them.

Each micro-batch's sums stay on the device (`micro_batch_sums`); the trainer adds them up, adds
the mismatch vector (learner/algorithm/mismatch.py) between the sums and the IS max, all-gathers once per
step and turns the total into metrics (`off_policy_metrics` for the correction's part).
"""

from __future__ import annotations

import logging

import torch

from microcoder.learner.algorithm import off_policy
from microcoder.learner.algorithm.grpo import TokenLoss

log = logging.getLogger(__name__)

SUMS = [
    "loss",
    "tokens",
    "response_tokens",
    "clipped",
    "entropy",
    "is_weight",
    "is_capped",
    "kl",
    "nonfinite",
    "dropped",
    "rejected",
    "nonfinite_seqs",
]
"""Sums all-reduced over ranks at the end of a step, in this order. "response_tokens": the tokens
trained on (a dropped sequence's are not); "nonfinite": parameter shards holding NaN/Inf after
the step (Learner.weights_finite, set by the trainer); "dropped" / "rejected": tokens / whole
sequences the off-policy correction took out of the loss; "nonfinite_seqs": sequences with a
non-finite log-prob, dropped (off_policy.finite_sequences)."""


def micro_batch_sums(
    loss: torch.Tensor,  # [] the micro-batch's loss
    terms: TokenLoss,
    corr: off_policy.Correction,
    entropy: torch.Tensor,  # [T]
    real: torch.Tensor,  # [T] bool: tokens that count (not a dummy's, not dropped as non-finite)
    bad: torch.Tensor,  # [S] bool: sequences the non-finite guard dropped
    seq_index: torch.Tensor,  # [T]
    num_seqs: int,
    tokens: int,  # prompt + response tokens of the micro-batch
) -> torch.Tensor:  # [len(SUMS) + 1] float64: SUMS, then the IS max
    """The micro-batch's SUMS and its largest IS weight, on the device (no host sync)."""
    r = real.double()
    rejected = off_policy.whole_sequences(corr.dropped, real, seq_index, num_seqs)
    zero = torch.zeros((), dtype=torch.float64, device=r.device)
    sums = torch.stack(
        [
            loss.detach().double(),
            zero,  # tokens, set below
            r.sum(),
            (terms.clipped.double() * r).sum(),
            (entropy.double() * r).sum(),
            (terms.is_weight.double() * r).sum(),
            (corr.capped.double() * r).sum(),
            (terms.kl.detach().double() * r).sum(),
            zero,  # nonfinite: the trainer sets the step's
            (corr.dropped.double() * r).sum(),
            rejected.double().sum(),
            bad.double().sum(),
            (terms.is_weight.double() * r).max(),
        ]
    )
    sums[1] = float(tokens)  # a fill on the device: no host sync
    return sums


def off_policy_metrics(s: dict[str, float], is_max: float) -> dict[str, float]:
    """The correction's and the guard's step metrics from the step's summed SUMS."""
    rt = max(s["response_tokens"], 1.0)
    return {
        "is_weight_mean": s["is_weight"] / rt,
        "is_weight_max": is_max,
        "is_capped_frac": s["is_capped"] / rt,
        "off_policy_dropped_frac": s["dropped"] / rt,
        "off_policy_rejected": s["rejected"],
        "nonfinite_learner_dropped": s["nonfinite_seqs"],
    }


def log_nonfinite(
    rank: int, version: int, policy_versions: list[torch.Tensor], bad: list[torch.Tensor]
) -> None:
    """Name the sequences whose log-probs were not finite on this rank, per mini-batch: their
    policy version (rank 0's intake log names the generator when a behaviour log-prob was it)."""
    for versions, b in zip(policy_versions, bad, strict=True):
        for i in torch.nonzero(b.cpu()).flatten().tolist():
            log.warning(
                "learner rank %d: step %d: a sequence of policy version %d has a non-finite "
                "learner log-prob; dropped from the loss (its gradient, if not finite too, is "
                "caught by the non-finite step guard: learner.max_skipped_steps)",
                rank,
                version,
                int(versions[i]),
            )

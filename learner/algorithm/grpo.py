"""MicroCoder-GRPO as pure tensor functions (arXiv 2603.07777, "Breaking Training Bottlenecks").

Everything the trainer needs to turn rewards and log-probs into a loss, with no model, no
distributed state and no config object: each function takes tensors and numbers and returns
tensors, so each can be checked by hand. Shapes are in the comments: N = responses in a batch,
T = response tokens in a (micro-)batch, V = vocabulary, S = sequences.

The objective, per response token t of response i (group of G responses to one prompt):

    A_i      = (r_i − mean_g(r)) / (std_g(r) + eps)                      group-normalised advantage
    r_i      ← r_i + overlong_penalty(|y_i|)                  (DAPO soft overlong punishment, off by default)
    A_i      ← 0  if truncated_i ∧ non_incorrect_i ∧ ¬looping_i ∧ U_i < rho   (conditional truncation mask)
    ratio_t  = exp(log pi_theta(o_t | T_i) − log pi_old(o_t | T_i))       log-probs at temperature T_i
    w_t      = min(exp(log pi_old − log pi_behaviour), C)     off-policy weight (algorithm.off_policy
                                                              = tis; the others: learner/algorithm/off_policy.py)
    l_t      = w_t · max(−A_i · ratio_t, −A_i · clip(ratio_t, 1 − eps_low, 1 + eps_high))
    loss     = Σ_t weight_t · l_t        weight_t from the aggregation mode (AGGREGATIONS)

No KL term by default (kl_coef = 0); `kl_k3` exists for the option. The masked responses keep
their rewards in their group's mean and std; only their own advantage becomes zero. The other
truncation arms (TRUNCATION_MASKS: `none`, `all`) replace the conditional mask's condition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

INCORRECT_VERDICTS = frozenset({"WA", "TLE", "MLE", "OLE", "RE"})
"""Verdicts of a response that ran a test and failed it. Anything else (AC, CE of truncated code,
SE, no code, `unfinished`, not judged) is "non-incorrect" for the truncation mask
(docs/architecture.md §5). `unfinished` (cut inside its reasoning or its final code block,
sandbox/extract.py) ran no test: it was shown neither right nor wrong, only out of tokens, which
is the case the paper's mask exists for; so a truncated unfinished response may be masked."""


def is_non_incorrect(verdict: str) -> bool:
    """True when the response did not fail a test it ran (its verdict is not WA/TLE/MLE/RE/OLE;
    `unfinished` is non-incorrect)."""
    return verdict.upper() not in INCORRECT_VERDICTS


def group_advantages(
    rewards: torch.Tensor,  # [N] float, one reward per response
    group_index: torch.Tensor,  # [N] long in [0, num_groups): the group of each response
    eps: float = 1e-6,
) -> torch.Tensor:  # [N] float
    """A_i = (r_i − mean(r_group)) / (std(r_group) + eps), per group.

    std is the unbiased sample standard deviation (Bessel, divisor G − 1), as in verl and TRL;
    a group of one response has std 0 and advantage 0. Groups whose rewards are all equal get
    advantage 0 exactly (no signal).
    """
    rewards = rewards.to(torch.float64)
    num_groups = int(group_index.max().item()) + 1 if group_index.numel() else 0
    count = torch.zeros(num_groups, dtype=torch.float64).index_add_(
        0, group_index, torch.ones_like(rewards)
    )
    total = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group_index, rewards)
    mean = total / count  # [num_groups]
    centred = rewards - mean[group_index]  # [N]
    sq = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group_index, centred**2)
    std = torch.sqrt(sq / (count - 1).clamp(min=1))  # [num_groups]
    return (centred / (std[group_index] + eps)).to(torch.float32)


def is_looping(response_ids: Sequence[int] | torch.Tensor, m: int) -> bool:
    """True when the last m tokens are identical to the m tokens before them (a repeat loop).

    A response shorter than 2·m cannot show a full repeat and is not looping. `response_ids`: a
    sequence of ints (a list, a numpy array) or a 1-D tensor (compared on its own device).
    """
    if len(response_ids) < 2 * m:
        return False
    tail = response_ids[-m:]
    before = response_ids[-2 * m : -m]
    if isinstance(tail, torch.Tensor):
        return torch.equal(tail, before)
    return list(tail) == list(before)


def conditional_truncation_mask(
    truncated: torch.Tensor,  # [N] bool: hit max_response_tokens
    non_incorrect: torch.Tensor,  # [N] bool: did not fail a test it ran
    looping: torch.Tensor,  # [N] bool: last m tokens repeat the m before them
    draws: torch.Tensor,  # [N] float in [0, 1): U_i, one independent uniform draw per response
    rho: float,
) -> torch.Tensor:  # [N] bool: True = advantage set to zero
    """The paper's mask: truncated ∧ non-incorrect ∧ ¬looping ∧ U < rho (all four must hold)."""
    return truncated & non_incorrect & ~looping & (draws < rho)


def _mask_none(
    truncated: torch.Tensor,
    non_incorrect: torch.Tensor,
    looping: torch.Tensor,
    draws: torch.Tensor,
    rho: float,
) -> torch.Tensor:  # [N] bool, all False
    """No truncation mask: every response keeps its advantage (GRPO)."""
    return torch.zeros_like(truncated, dtype=torch.bool)


def _mask_all(
    truncated: torch.Tensor,
    non_incorrect: torch.Tensor,
    looping: torch.Tensor,
    draws: torch.Tensor,
    rho: float,
) -> torch.Tensor:  # [N] bool
    """DAPO's overlong filtering: every truncated response, whatever its verdict."""
    return truncated.clone().bool()


MaskFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]
TRUNCATION_MASKS: dict[str, MaskFn] = {
    "none": _mask_none,
    "all": _mask_all,
    "conditional": conditional_truncation_mask,
}
"""The truncation arms (algorithm.truncation_mask): name -> f(truncated, non_incorrect, looping,
draws, rho) -> [N] bool, True = advantage set to zero."""


def overlong_penalty(
    response_lens: torch.Tensor,  # [N] long: response tokens
    max_tokens: int,  # L_max: the generator's max response tokens
    buffer_tokens: int,  # L_cache: the soft zone below L_max
    factor: float,
) -> torch.Tensor:  # [N] float64, in [−factor, 0]
    """DAPO's soft overlong punishment, added to the reward before the group advantages:
    factor · min(0, (L_max − L_cache − |y|) / L_cache), at least −factor (reached at L_max).

    0 for responses up to L_max − L_cache, then falling linearly to −factor at L_max.
    """
    if buffer_tokens <= 0 or buffer_tokens >= max_tokens:
        raise ValueError(
            f"the overlong penalty needs 0 < L_cache < L_max (got L_cache = {buffer_tokens}, "
            f"L_max = {max_tokens}); set algorithm.overlong_buffer_tokens below "
            "algorithm.overlong_max_tokens (0 there = generator.max_response_tokens, filled by "
            "the launcher)"
        )
    over = (max_tokens - buffer_tokens - response_lens.to(torch.float64)) / buffer_tokens
    return factor * over.clamp(min=-1.0, max=0.0)


def mask_draws(n: int, generator: torch.Generator) -> torch.Tensor:  # [n] float in [0, 1)
    """U_i ~ Uniform(0, 1), one per response, from a seeded generator (reproducible per step)."""
    return torch.rand(n, generator=generator, dtype=torch.float64)


def apply_mask(advantages: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:  # [N]
    """Zero the advantage of masked responses; statistics were taken before, so they still count."""
    return torch.where(masked, torch.zeros_like(advantages), advantages)


def token_logprobs(
    logits: torch.Tensor,  # [T, V] logits at the positions that predict each target token
    targets: torch.Tensor,  # [T] long: the sampled tokens
    temperature: torch.Tensor,  # [T] float: sampling temperature of each token's response
) -> tuple[torch.Tensor, torch.Tensor]:  # ([T] log pi(target | T), [T] entropy of pi(· | T))
    """log softmax(logits / T) at the target, and the entropy of that tempered distribution.

    Computed in float32 whatever the logits' dtype. The entropy is returned detached (a metric).
    """
    scaled = logits.float() / temperature.float().unsqueeze(-1)  # [T, V]
    logp_all = torch.log_softmax(scaled, dim=-1)  # [T, V]
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [T]
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # [T]
    return logp, entropy


def _head_logprobs(
    hidden: torch.Tensor,  # [C, H]
    targets: torch.Tensor,  # [C]
    temperature: torch.Tensor,  # [C]
    weight: torch.Tensor,  # [V, H]
    bias: torch.Tensor | None,  # [V] or None
    scale: float = 1.0,
    softcap: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # ([C], [C])
    return token_logprobs(
        final_logits(F.linear(hidden, weight, bias), scale, softcap), targets, temperature
    )


def final_logits(
    logits: torch.Tensor,  # [C, V] the head's output
    scale: float = 1.0,  # Cohere's logit_scale, 1 / Granite's logits_scaling
    softcap: float | None = None,  # Gemma-2's final_logit_softcapping
) -> torch.Tensor:  # [C, V]
    """The model's own processing of the head's output, as its forward applies it:
    logits · scale, then softcap · tanh(logits / softcap) (learner/models/families.py: head_transform)."""
    if scale != 1.0:
        logits = logits * scale
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    return logits


def chunked_token_logprobs(
    hidden: torch.Tensor,  # [T, H] final hidden states at the positions that predict the targets
    weight: torch.Tensor,  # [V, H] LM head weight
    targets: torch.Tensor,  # [T] long
    temperature: torch.Tensor,  # [T] float
    chunk_tokens: int,  # tokens per chunk; 0 = the whole [T, V] at once
    bias: torch.Tensor | None = None,  # [V] LM head bias (Qwen2 and Llama have none)
    scale: float = 1.0,  # the model's final logit multiplier (final_logits)
    softcap: float | None = None,  # the model's final logit soft-cap (final_logits)
) -> tuple[torch.Tensor, torch.Tensor]:  # ([T] log pi(target | T), [T] entropy), as token_logprobs
    """token_logprobs(final_logits(hidden @ weight.T + bias), targets, temperature), `chunk_tokens`
    rows at a time (`scale`, `softcap`: the model's own logit processing, which its forward
    applies after the head: without them Gemma-2, Granite and Cohere would get other log-probs).

    With gradients on, each chunk runs under activation checkpointing: its logits are freed
    after the forward and recomputed in backward, so at most one [chunk, V] block of logits (and
    the few temporaries token_logprobs makes of it) exists at any time, instead of [T, V]. The
    per-token values are token_logprobs' on the same rows; gradients flow to `hidden`, `weight`
    and `bias`. Under no_grad the chunks are simply computed one after the other.
    """

    head = partial(_head_logprobs, scale=scale, softcap=softcap)
    if chunk_tokens <= 0:
        return head(hidden, targets, temperature, weight, bias)
    if torch.is_grad_enabled():
        run = partial(checkpoint, head, use_reentrant=False)
    else:
        run = head
    parts = [
        run(h, t, tau, weight, bias)
        for h, t, tau in zip(
            hidden.split(chunk_tokens),
            targets.split(chunk_tokens),
            temperature.split(chunk_tokens),
            strict=True,
        )
    ]
    logp = torch.cat([p[0] for p in parts])
    entropy = torch.cat([p[1] for p in parts])
    return logp, entropy


def clipped_policy_loss(
    logp: torch.Tensor,  # [T] log pi_theta (with gradient)
    old_logp: torch.Tensor,  # [T] log pi_old (no gradient)
    advantages: torch.Tensor,  # [T] advantage of each token's response
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, torch.Tensor]:  # ([T] loss per token, [T] bool clipped)
    """max(−A·ratio, −A·clip(ratio, 1 − eps_low, 1 + eps_high)) per token (clip-higher PPO).

    `clipped` is True where the clipped branch is strictly the larger one, i.e. where the token
    contributes no gradient because its ratio left the trust region in the direction of A.
    """
    ratio = torch.exp(logp - old_logp.detach())  # [T]
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    return torch.maximum(unclipped, clipped), clipped > unclipped


def kl_k3(
    logp: torch.Tensor,  # [T] log pi_theta
    ref_logp: torch.Tensor,  # [T] log pi_ref
) -> torch.Tensor:  # [T] non-negative
    """Schulman's k3 estimator of KL(pi_theta || pi_ref): exp(d) − d − 1 with d = ref − logp."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


class TokenLoss(NamedTuple):
    """Per-token terms of the objective (all [T])."""

    loss: torch.Tensor  # w_is · clipped surrogate (+ kl_coef · kl), with gradient
    clipped: torch.Tensor  # bool: the clipped branch was active
    is_weight: torch.Tensor  # the off-policy correction's weight (1 with none)
    kl: torch.Tensor  # k3 estimate against the reference (0 when there is none)


def token_loss(
    logp: torch.Tensor,  # [T] log pi_theta
    old_logp: torch.Tensor,  # [T] log pi_old
    advantages: torch.Tensor,  # [T]
    eps_low: float,
    eps_high: float,
    is_weight: torch.Tensor | None = None,  # [T] the correction's weight (off_policy.py); None = 1
    ref_logp: torch.Tensor | None = None,  # [T] log pi_ref; None = no KL term
    kl_coef: float = 0.0,
) -> TokenLoss:
    """l_t = w_t · max(−A·ratio, −A·clip(ratio)) + kl_coef · k3(t), before aggregation.

    w_t: the off-policy correction's weight (learner/algorithm/off_policy.py: OFF_POLICY), detached."""
    surrogate, clipped = clipped_policy_loss(logp, old_logp, advantages, eps_low, eps_high)
    return weigh(surrogate, clipped, logp, is_weight, ref_logp, kl_coef)


def weigh(
    surrogate: torch.Tensor,  # [T] the policy loss per token (learner/algorithm/policy_loss.py)
    clipped: torch.Tensor,  # [T] bool: its clip took the token's gradient
    logp: torch.Tensor,  # [T] log pi_theta (for the KL term)
    is_weight: torch.Tensor | None = None,  # [T] the correction's weight; None = 1
    ref_logp: torch.Tensor | None = None,  # [T] log pi_ref; None = no KL term
    kl_coef: float = 0.0,
) -> TokenLoss:
    """l_t = w_t · surrogate_t + kl_coef · k3(t): any policy loss's per-token terms, before
    aggregation, with w_t the off-policy weight (detached)."""
    w = torch.ones_like(surrogate) if is_weight is None else is_weight.detach().to(surrogate.dtype)
    loss = w * surrogate
    kl = torch.zeros_like(surrogate)
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp)
        loss = loss + kl_coef * kl
    return TokenLoss(loss, clipped, w, kl)


# --- aggregation: each mode gives every token of sequence s the weight w_s -----------------------


def _token_mean(lengths: torch.Tensor, constant: float) -> torch.Tensor:
    """DAPO: one mean over all response tokens of the batch: w_s = 1 / Σ lengths."""
    return torch.full_like(lengths, 1.0 / max(float(lengths.sum()), 1.0), dtype=torch.float64)


def _seq_mean_token_mean(lengths: torch.Tensor, constant: float) -> torch.Tensor:
    """GRPO: mean over sequences of each sequence's token mean: w_s = 1 / (S · len_s)."""
    return 1.0 / (lengths.numel() * lengths.to(torch.float64).clamp(min=1))


def _constant_normaliser(lengths: torch.Tensor, constant: float) -> torch.Tensor:
    """Dr.GRPO: token sum over a constant budget: w_s = 1 / (S · constant), constant = max tokens."""
    if constant <= 0:
        raise ValueError(
            "constant-normaliser aggregation needs a positive constant (the max response tokens); "
            "set algorithm.loss_constant"
        )
    return torch.full_like(lengths, 1.0 / (lengths.numel() * constant), dtype=torch.float64)


AGGREGATIONS: dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "constant-normaliser": _constant_normaliser,
}
"""Loss aggregation modes: name -> f(lengths [S] long, constant) -> per-sequence token weight [S]."""


def sequence_weights(mode: str, lengths: torch.Tensor, constant: float = 0.0) -> torch.Tensor:
    """Per-token weight of each sequence ([S] float64) for aggregation `mode` over the WHOLE batch.

    Computing the weights once for the global batch makes gradient accumulation and data
    parallelism exact: every micro-batch on every rank sums weight·loss over its own tokens.
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation '{mode}'; choose one of {sorted(AGGREGATIONS)}")
    return AGGREGATIONS[mode](lengths, constant)


def aggregate(
    token_loss: torch.Tensor,  # [T] loss per token
    seq_index: torch.Tensor,  # [T] long: sequence of each token, in [0, S)
    lengths: torch.Tensor,  # [S] long: response tokens per sequence
    mode: str,
    constant: float = 0.0,
) -> torch.Tensor:  # [] scalar loss
    """Σ_t w_{s(t)} · l_t for one batch held in one tensor (the trainer does the same piecewise)."""
    w = sequence_weights(mode, lengths, constant).to(token_loss.dtype)  # [S]
    return (token_loss * w[seq_index]).sum()


def group_has_signal(rewards: Sequence[float]) -> bool:
    """Dynamic filtering (DAPO): a group whose rewards are all equal has no signal (all A = 0)."""
    return len(rewards) > 1 and max(rewards) != min(rewards)

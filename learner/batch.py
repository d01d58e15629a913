"""From the packed batch to a training batch: advantages, the truncation mask, per-sequence views."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from microcoder.learner.algorithm import grpo
from microcoder.learner.config import AlgorithmConfig
from microcoder.learner.intake import pack_samples
from microcoder.learner.sample import SampleGroup
from microcoder.protocol import PackedBatch


@dataclass(frozen=True)
class BatchStats:
    """Counts about one training batch, logged as metrics (what rank 0 saw while fetching, e.g.
    the filtered groups and the mean reward, is learner/intake.py: IntakeStats)."""

    groups: int
    """Groups trained on."""
    responses: int
    """Responses trained on (sequences)."""
    truncated: int
    """Responses that hit max_response_tokens."""
    looping: int
    """Truncated responses whose last `algorithm.repeat_window` tokens repeat the ones before
    them (the conditional mask never takes these)."""
    masked: int
    """Responses whose advantage the truncation mask (algorithm.truncation_mask) set to zero."""
    overlong_penalised: int
    """Responses the soft overlong punishment lowered (longer than L_max − L_cache)."""
    mixed_versions: int
    """Responses sampled under more than one policy version (an in-flight weight update)."""


@dataclass(frozen=True)
class TrainBatch:
    """S sequences (prompt + response) with everything the loss needs, per sequence."""

    input_ids: list[torch.Tensor]  # S × [P_s + R_s] long
    prompt_lens: torch.Tensor  # [S] long
    response_lens: torch.Tensor  # [S] long
    advantages: torch.Tensor  # [S] float32, zero where masked
    temperatures: torch.Tensor  # [S] float32
    behaviour_logprobs: list[torch.Tensor]  # S × [R_s] float32
    policy_versions: torch.Tensor  # [S] long
    stats: BatchStats
    masked: torch.Tensor | None = None  # [S] bool: the truncation mask took the sequence
    last_policy_versions: torch.Tensor | None = None  # [S] long; None = policy_versions
    loss_masks: list[torch.Tensor] | None = None  # S × [R_s] bool: model tokens; None = all

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> torch.Tensor:  # [S] long: total tokens per sequence
        return self.prompt_lens + self.response_lens

    def select(self, indices: Sequence[int]) -> TrainBatch:
        """The sub-batch of the given sequences (for mini-batches); stats are kept as they are."""
        idx = torch.as_tensor(list(indices), dtype=torch.long)
        return TrainBatch(
            input_ids=[self.input_ids[i] for i in indices],
            prompt_lens=self.prompt_lens[idx],
            response_lens=self.response_lens[idx],
            advantages=self.advantages[idx],
            temperatures=self.temperatures[idx],
            behaviour_logprobs=[self.behaviour_logprobs[i] for i in indices],
            policy_versions=self.policy_versions[idx],
            stats=self.stats,
            masked=None if self.masked is None else self.masked[idx],
            last_policy_versions=None
            if self.last_policy_versions is None
            else self.last_policy_versions[idx],
            loss_masks=None if self.loss_masks is None else [self.loss_masks[i] for i in indices],
        )

    @property
    def model_lens(self) -> torch.Tensor:  # [S] long: the response tokens the loss reads
        """Each sequence's model tokens (its response tokens less a multi-turn trajectory's
        feedback tokens): the token counts of every loss aggregation."""
        if self.loss_masks is None:
            return self.response_lens
        return torch.tensor([int(m.sum()) for m in self.loss_masks], dtype=torch.long)

    @property
    def spanned(self) -> torch.Tensor:  # [S] bool: an in-flight update split the response
        if self.last_policy_versions is None:
            return torch.zeros(len(self), dtype=torch.bool)
        return self.last_policy_versions != self.policy_versions


def mask_generator(seed: int, version: int) -> torch.Generator:
    """The seeded generator of the mask draws for the step that produces `version + 1`.

    Derived from (seed, version) only, so every rank draws the same and a resumed run draws
    what the uninterrupted run would have.
    """
    return torch.Generator().manual_seed(seed * 1_000_003 + version)


def build_batch(
    batch: PackedBatch | Sequence[SampleGroup], algo: AlgorithmConfig, generator: torch.Generator
) -> TrainBatch:
    """Group advantages, the truncation mask drawn from `generator`, per-sequence views.

    With algorithm.overlong_buffer_tokens > 0 the soft overlong punishment is added to the
    rewards first (grpo.overlong_penalty), so it moves the group's advantages; the dynamic
    filter before saw the unpenalised rewards (as DAPO filters on accuracy).

    No filtering here: the one dynamic filter ran before packing (learner/intake.py:
    `signal_filter`). SampleGroups (benchmarks, tests) are packed first, as they are.

    A multi-turn trajectory (feedback tokens in `response_mask`): its `truncated` and verdict
    are the final turn's already, and the truncation mask's loop check and the overlong
    punishment read the final turn too (the model tokens after the last feedback token:
    `final_turn_lens`); the TrainBatch keeps the masks (`loss_masks`) for the loss.
    """
    if not isinstance(batch, PackedBatch):
        batch = pack_samples(batch)
    n = len(batch)
    lengths = (batch.prompt_lens + batch.response_lens).tolist()
    input_ids = list(batch.tokens.long().split(lengths))
    responses = [s[int(p) :] for s, p in zip(input_ids, batch.prompt_lens.tolist(), strict=True)]
    rewards = batch.rewards
    penalised = torch.zeros(n, dtype=torch.bool)
    masks = list(batch.response_mask.split(batch.response_lens.tolist()))
    multi_turn = not bool(batch.response_mask.all())
    final_lens = final_turn_lens(masks) if multi_turn else batch.response_lens
    if multi_turn:  # the truncation mask's loop check reads the final turn's tokens only
        responses = [r[len(r) - k :] for r, k in zip(responses, final_lens.tolist(), strict=True)]
    if algo.overlong_buffer_tokens and n:
        penalty = grpo.overlong_penalty(
            final_lens,
            algo.overlong_max_tokens,
            algo.overlong_buffer_tokens,
            algo.overlong_penalty,
        )
        rewards = (rewards.to(torch.float64) + penalty).to(rewards.dtype)
        penalised = penalty < 0
    if n:
        advantages = grpo.group_advantages(rewards, batch.group_index, algo.adv_eps)
        # Only a truncated response can be masked, so only its loop check matters.
        looping = torch.tensor(
            [
                bool(t) and grpo.is_looping(r, algo.repeat_window)
                for r, t in zip(responses, batch.truncated.tolist(), strict=True)
            ],
            dtype=torch.bool,
        )
        draws = grpo.mask_draws(n, generator)
        masked = grpo.TRUNCATION_MASKS[algo.truncation_mask](
            batch.truncated, batch.non_incorrect, looping, draws, algo.rho
        )
        advantages = grpo.apply_mask(advantages, masked)
    else:
        advantages = torch.zeros(0)
        masked = looping = torch.zeros(0, dtype=torch.bool)
    stats = BatchStats(
        groups=len(batch.group_ids),
        responses=n,
        truncated=int(batch.truncated.sum()),
        looping=int(looping.sum()),
        masked=int(masked.sum()),
        overlong_penalised=int(penalised.sum()),
        mixed_versions=int((batch.last_policy_versions != batch.policy_versions).sum()),
    )
    return TrainBatch(
        input_ids=input_ids,
        prompt_lens=batch.prompt_lens,
        response_lens=batch.response_lens,
        advantages=advantages.float(),
        temperatures=batch.temperatures,
        behaviour_logprobs=list(batch.behaviour_logprobs.split(batch.response_lens.tolist())),
        policy_versions=batch.policy_versions,
        stats=stats,
        masked=masked,
        last_policy_versions=batch.last_policy_versions,
        loss_masks=masks if multi_turn else None,
    )


def final_turn_lens(masks: Sequence[torch.Tensor]) -> torch.Tensor:  # [S] long
    """The model tokens of each trajectory's final turn: the run of model tokens after its last
    feedback token (the whole response for a single turn). The soft overlong punishment reads
    it, as the truncation mask reads the final turn: each turn has its own token cap."""
    out = []
    for m in masks:
        feedback = torch.nonzero(~m)
        out.append(len(m) - (int(feedback[-1]) + 1 if len(feedback) else 0))
    return torch.tensor(out, dtype=torch.long)

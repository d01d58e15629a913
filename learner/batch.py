"""From scored groups to a training batch: dynamic filtering, advantages, the truncation mask."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from microcoder.learner import grpo
from microcoder.learner.config import AlgorithmConfig
from microcoder.learner.sample import SampleGroup


@dataclass(frozen=True)
class BatchStats:
    """Counts about one batch, logged as metrics."""

    groups: int
    """Groups received."""
    filtered_groups: int
    """Groups dropped by dynamic filtering (all rewards equal)."""
    responses: int
    """Responses kept (sequences trained on)."""
    truncated: int
    """Kept responses that hit max_response_tokens."""
    masked: int
    """Kept responses whose advantage the conditional truncation mask set to zero."""
    mean_reward: float
    """Mean reward over the groups received (before filtering)."""


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
        )


def mask_generator(seed: int, version: int) -> torch.Generator:
    """The seeded generator of the mask draws for the step that produces `version + 1`.

    Derived from (seed, version) only, so every rank draws the same and a resumed run draws
    what the uninterrupted run would have.
    """
    return torch.Generator().manual_seed(seed * 1_000_003 + version)


def build_batch(
    groups: Sequence[SampleGroup], algo: AlgorithmConfig, generator: torch.Generator
) -> TrainBatch:
    """Filter groups (if enabled), compute group advantages, draw and apply the truncation mask."""
    kept = [g for g in groups if not algo.dynamic_filtering or grpo.group_has_signal(g.rewards)]
    samples = [s for g in kept for s in g.samples]
    group_index = torch.tensor([k for k, g in enumerate(kept) for _ in g.samples], dtype=torch.long)
    rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)
    truncated = torch.tensor([s.truncated for s in samples], dtype=torch.bool)
    if samples:
        advantages = grpo.group_advantages(rewards, group_index, algo.adv_eps)
    else:
        advantages = torch.zeros(0)
    if algo.truncation_mask and samples:
        non_incorrect = torch.tensor([grpo.is_non_incorrect(s.verdict) for s in samples])
        looping = torch.tensor(
            [grpo.is_looping(s.response_ids, algo.repeat_window) for s in samples]
        )
        draws = grpo.mask_draws(len(samples), generator)
        masked = grpo.conditional_truncation_mask(
            truncated, non_incorrect, looping, draws, algo.mask_prob
        )
        advantages = grpo.apply_mask(advantages, masked)
    else:
        masked = torch.zeros(len(samples), dtype=torch.bool)
    all_rewards = [r for g in groups for r in g.rewards]
    stats = BatchStats(
        groups=len(groups),
        filtered_groups=len(groups) - len(kept),
        responses=len(samples),
        truncated=int(truncated.sum()),
        masked=int(masked.sum()),
        mean_reward=sum(all_rewards) / max(len(all_rewards), 1),
    )
    return TrainBatch(
        input_ids=[
            torch.tensor([*s.prompt_ids, *s.response_ids], dtype=torch.long) for s in samples
        ],
        prompt_lens=torch.tensor([len(s.prompt_ids) for s in samples], dtype=torch.long),
        response_lens=torch.tensor([len(s.response_ids) for s in samples], dtype=torch.long),
        advantages=advantages.float(),
        temperatures=torch.tensor([s.temperature for s in samples], dtype=torch.float32),
        behaviour_logprobs=[
            torch.tensor(s.behaviour_logprobs, dtype=torch.float32) for s in samples
        ],
        policy_versions=torch.tensor([s.policy_version for s in samples], dtype=torch.long),
        stats=stats,
    )

"""The truncation arms (algorithm.truncation_mask) and DAPO's soft overlong punishment, on
hand-built batches (the conditional mask's own cases: tests/learner/test_batch.py)."""

from __future__ import annotations

import pytest
import torch

from microcoder.config import ConfigError
from microcoder.launch.config import load_config
from microcoder.learner.algorithm import grpo
from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig, TruncationMask
from microcoder.learner.sample import SampleGroup, TrainSample


def sample(reward, truncated=False, verdict="AC", length=3):
    resp = list(range(5, 5 + length))
    return TrainSample([1, 2], resp, [-1.0] * length, 1.0, reward, truncated, verdict, 0)


def mixed_group():
    """Truncated responses with every kind of verdict, plus untruncated ones (rewards differ)."""
    return [
        SampleGroup(
            "a",
            [
                sample(0.0, True, "CE"),
                sample(0.0, True, "WA"),
                sample(1.0, True, "AC"),
                sample(1.0),
                sample(0.0, False, "WA"),
            ],
        )
    ]


def test_the_config_modes_are_the_registered_mask_functions():
    assert set(TruncationMask.__args__) == set(grpo.TRUNCATION_MASKS)


def test_mask_all_zeroes_every_truncated_advantage_incorrect_ones_too():
    batch = build_batch(mixed_group(), AlgorithmConfig(truncation_mask="all"), mask_generator(0, 0))
    assert batch.advantages[:3].tolist() == [0.0, 0.0, 0.0]
    assert batch.stats.masked == 3


def test_mask_all_keeps_the_untruncated_advantages():
    batch = build_batch(mixed_group(), AlgorithmConfig(truncation_mask="all"), mask_generator(0, 0))
    assert batch.advantages[3] > 0 and batch.advantages[4] < 0


def test_mask_none_zeroes_no_advantage_even_at_rho_one():
    algo = AlgorithmConfig(truncation_mask="none", rho=1.0)
    batch = build_batch(mixed_group(), algo, mask_generator(0, 0))
    assert bool((batch.advantages != 0).all()) and batch.stats.masked == 0


def test_conditional_at_rho_one_masks_only_the_non_incorrect_truncated():
    algo = AlgorithmConfig(truncation_mask="conditional", rho=1.0)
    batch = build_batch(mixed_group(), algo, mask_generator(0, 0))
    zero = (batch.advantages == 0).tolist()
    assert zero == [True, False, True, False, False]


@pytest.mark.parametrize("value, mode", [("true", "conditional"), ("false", "none")])
def test_a_bool_truncation_mask_names_the_mode_to_set(value, mode):
    with pytest.raises(ConfigError, match=f'set it to "{mode}"'):
        load_config(None, [f"algorithm.truncation_mask={value}"])


def test_the_old_mask_prob_key_says_to_set_rho():
    with pytest.raises(ConfigError, match="mask_prob' was removed: renamed: set algorithm.rho"):
        load_config(None, ["algorithm.mask_prob=0.2"])


def test_overlong_penalty_on_hand_computed_lengths():
    # L_max = 20, L_cache = 8: free up to 12, then −(|y| − 12) / 8 · 0.5, −0.5 at 20.
    lens = torch.tensor([5, 12, 13, 16, 20])
    penalty = grpo.overlong_penalty(lens, max_tokens=20, buffer_tokens=8, factor=0.5)
    assert penalty.tolist() == [0.0, 0.0, -0.0625, -0.25, -0.5]


def test_overlong_penalty_moves_the_rewards_before_the_group_advantages():
    # Both correct: equal rewards give no signal; the penalty on the long one makes the short one
    # better. L_max = 8, L_cache = 4: the 8-token response gets −1, the 3-token one 0.
    groups = [SampleGroup("a", [sample(1.0, length=3), sample(1.0, True, "AC", length=8)])]
    algo = AlgorithmConfig(truncation_mask="none", overlong_buffer_tokens=4, overlong_max_tokens=8)
    batch = build_batch(groups, algo, mask_generator(0, 0))
    expected = grpo.group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]))
    assert torch.allclose(batch.advantages, expected) and batch.stats.overlong_penalised == 1


def test_the_launcher_fills_the_penalty_cap_from_the_generator():
    cfg = load_config(None, ["generator.max_response_tokens=96"])
    assert cfg.algorithm.overlong_max_tokens == 96


def test_a_buffer_not_below_the_cap_names_the_fix():
    with pytest.raises(ConfigError, match="overlong_buffer_tokens = 96 is not below L_max = 96"):
        load_config(
            None, ["generator.max_response_tokens=96", "algorithm.overlong_buffer_tokens=96"]
        )

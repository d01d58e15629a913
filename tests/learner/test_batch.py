"""Building a training batch: advantages, the truncation mask, per-sequence views (the dynamic
filter runs before, in the intake: tests/learner/test_intake.py)."""

from __future__ import annotations

import torch

from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig
from microcoder.learner.sample import SampleGroup, TrainSample


def sample(reward, truncated=False, verdict="AC", resp=(5, 6, 7)):
    return TrainSample([1, 2], list(resp), [-1.0] * len(resp), 1.0, reward, truncated, verdict, 0)


def test_without_filtering_equal_groups_stay_with_zero_advantage():
    groups = [SampleGroup("a", [sample(1.0), sample(1.0)])]
    batch = build_batch(groups, AlgorithmConfig(dynamic_filtering=False), mask_generator(0, 0))
    assert len(batch) == 2 and torch.equal(batch.advantages, torch.zeros(2))


def test_truncated_non_incorrect_responses_are_masked_at_rho_one():
    groups = [SampleGroup("a", [sample(0.0, True, "CE"), sample(1.0), sample(0.0, True, "WA")])]
    batch = build_batch(groups, AlgorithmConfig(rho=1.0), mask_generator(0, 0))
    assert batch.advantages[0] == 0 and batch.advantages[2] != 0 and batch.stats.masked == 1


def test_looping_truncated_response_is_not_masked():
    loop = [3, 4] * 4
    groups = [SampleGroup("a", [sample(0.0, True, "CE", loop), sample(1.0)])]
    batch = build_batch(groups, AlgorithmConfig(rho=1.0, repeat_window=2), mask_generator(0, 0))
    assert batch.advantages[0] != 0 and batch.stats.looping == 1
    # the same response is no loop to a window longer than half of it: masked at rho 1
    batch = build_batch(groups, AlgorithmConfig(rho=1.0, repeat_window=5), mask_generator(0, 0))
    assert batch.advantages[0] == 0 and batch.stats.looping == 0


def test_mask_draws_repeat_for_the_same_seed_and_version():
    a = torch.rand(5, generator=mask_generator(4, 9))
    assert torch.equal(a, torch.rand(5, generator=mask_generator(4, 9)))
    assert not torch.equal(a, torch.rand(5, generator=mask_generator(4, 10)))


def test_sequences_are_prompt_then_response():
    batch = build_batch(
        [SampleGroup("a", [sample(0.0), sample(1.0)])], AlgorithmConfig(), mask_generator(0, 0)
    )
    assert batch.input_ids[0].tolist() == [1, 2, 5, 6, 7]
    assert batch.prompt_lens.tolist() == [2, 2] and batch.response_lens.tolist() == [3, 3]


def test_responses_sampled_under_two_versions_are_counted():
    mixed = TrainSample([1, 2], [5, 6], [-1.0, -1.0], 1.0, 0.0, False, "WA", 2, 3)
    groups = [SampleGroup("a", [mixed, sample(1.0)])]
    batch = build_batch(groups, AlgorithmConfig(), mask_generator(0, 0))
    assert batch.stats.mixed_versions == 1 and batch.policy_versions.tolist() == [2, 0]


def test_sequences_are_views_of_one_long_tensor_of_tokens():
    batch = build_batch(
        [SampleGroup("a", [sample(0.0), sample(1.0)])], AlgorithmConfig(), mask_generator(0, 0)
    )
    assert batch.input_ids[0].dtype == torch.long
    assert batch.input_ids[1].data_ptr() == batch.input_ids[0].data_ptr() + 5 * 8

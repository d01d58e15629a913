"""A training step's metrics describe the batch it trained on: the response length and the
truncation rate that `microcoder compare` plots come from the learner's own batch."""

from __future__ import annotations

import pytest

from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner


def _group(name: str, lengths: list[int], truncated: list[bool]) -> SampleGroup:
    samples = [
        TrainSample([1, 2, 3], [5 + i] * n, [-2.0] * n, 1.0, float(i % 2), t, "WA", 0)
        for i, (n, t) in enumerate(zip(lengths, truncated, strict=True))
    ]
    return SampleGroup(name, samples)


def test_step_logs_the_mean_response_length_and_truncation_of_the_trained_batch(small_model):
    learner = Learner(
        small_model,
        LearnerConfig(micro_batch_tokens=512),
        AlgorithmConfig(truncation_mask="none", dynamic_filtering=True, repeat_window=8),
        seed=0,
    )
    groups = [
        _group("a", [4, 8, 12, 16], [False, False, False, True]),
        _group("b", [20, 20, 20, 20], [True, True, False, False]),
        # equal rewards would be filtered out: its 100-token responses must not count
        SampleGroup("c", [TrainSample([1], [7] * 100, [-2.0] * 100, 1.0, 1.0, True, "AC", 0)] * 4),
    ]
    m = learner.train_step(groups)
    assert m["responses"] == 8
    assert m["response_len_mean"] == pytest.approx((4 + 8 + 12 + 16 + 80) / 8)
    assert m["truncated_frac"] == pytest.approx(3 / 8)
    # each response repeats one token: the truncated ones of 16 and 20 tokens loop at m = 8
    assert m["looping_frac"] == pytest.approx(3 / 8)

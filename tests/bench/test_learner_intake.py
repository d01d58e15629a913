"""bench learner --intake: both sides build the same training batch from the same groups (the
baseline is the old lists path, the other side today's packed one)."""

from __future__ import annotations

import torch

from microcoder.actors.convert import to_group_arrays
from microcoder.bench.learner_intake import (
    baseline_build_batch,
    baseline_to_sample_group,
    batch_digest,
    synthetic_scored_groups,
)
from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig
from microcoder.learner.intake import pack


def test_the_baseline_and_the_packed_path_build_equal_training_batches():
    groups = synthetic_scored_groups(3, 4, 6, 10)
    algo = AlgorithmConfig(rho=1.0)
    old = baseline_build_batch(
        [baseline_to_sample_group(sg) for sg in groups], algo, mask_generator(0, 0)
    )
    new = build_batch(pack([to_group_arrays(sg) for sg in groups]), algo, mask_generator(0, 0))
    assert batch_digest(old["input_ids"], old["behaviour_logprobs"], old["advantages"]) == (
        batch_digest(new.input_ids, new.behaviour_logprobs, new.advantages)
    )
    assert torch.equal(old["prompt_lens"], new.prompt_lens) and len(new) == 12
    assert new.stats.masked > 0  # the mask ran on both sides (rho = 1, truncated responses)

"""A user policy loss (`algorithm.policy_loss = "module:function"`) on real learner steps: one that
re-implements `clip` trains bit for bit as `clip` does, with the off-policy weight, the
aggregation and the truncation mask around it, and its named metrics are step metrics; one that
raises stops the first step naming it, before any update. And the built-ins' own metrics.

One in-process rank on CPU (a gloo world of 1), the small model of conftest.py."""

from __future__ import annotations

import math

import pytest
import torch
from learner_groups import mixed_groups

from microcoder.learner.algorithm.policy_loss import PolicyLossError
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.trainer import Learner


def make_learner(model, loss: str, **algorithm) -> Learner:
    return Learner(
        model,
        LearnerConfig(lr=1e-3, micro_batch_tokens=512, mini_batches=2),
        AlgorithmConfig(policy_loss=loss, aggregation="seq-mean-token-mean", rho=1.0, **algorithm),
        seed=0,
    )


def params(learner: Learner) -> dict[str, torch.Tensor]:
    return {n: p.to_local().clone() for n, p in learner.model.named_parameters()}


def test_a_user_loss_composes_with_the_rest_exactly_as_the_builtin(small_model):
    """`user_losses:ppo` is `clip` written again: two steps of two mini-batches (the second with
    ratios off 1, so the clip acts) give the same weights and loss, bit for bit."""
    mine, builtin = make_learner(small_model, "user_losses:ppo"), make_learner(small_model, "clip")
    before = params(mine)
    for step in range(2):
        m, b = mine.train_step(mixed_groups(step)), builtin.train_step(mixed_groups(step))
        assert m["loss"] == b["loss"] and m["clip_frac"] == b["clip_frac"]
        assert m["is_weight_mean"] == b["is_weight_mean"] != 1.0  # tis weighs both alike
    after = params(mine)
    assert all(torch.equal(after[n], t) for n, t in params(builtin).items())
    assert any(not torch.equal(after[n], before[n]) for n in before)
    # its metrics: means over the trained tokens, the ratio off 1 in the second mini-batch
    assert math.isfinite(m["policy_loss_ratio"]) and m["policy_loss_ratio"] != 1.0
    assert m["policy_loss_behaviour_gap"] != 0.0
    assert "policy_loss_ratio" not in b


def test_a_raising_user_loss_stops_the_first_step_naming_it(small_model):
    learner = make_learner(small_model, "user_losses:boom")
    with pytest.raises(
        PolicyLossError, match="user_losses:boom.*ZeroDivisionError: the user's bug"
    ):
        learner.train_step(mixed_groups(0))
    assert learner.version == 0 and learner.updates_skipped == 0  # no optimizer step ran


def test_a_user_loss_returning_no_per_token_losses_is_refused(small_model):
    learner = make_learner(small_model, "user_losses:scalar")
    with pytest.raises(
        PolicyLossError,
        match=r"user_losses:scalar .* returned a LossOutput with \{'loss': \(\)\}.*shaped like logp",
    ):
        learner.train_step(mixed_groups(0))


@pytest.mark.parametrize(
    "loss, metric",
    [("dual-clip", "policy_loss_dual_clipped"), ("gspo", "policy_loss_seq_ratio"), ("cispo", None)],
)
def test_each_builtin_trains_a_step_with_a_finite_loss(small_model, loss, metric):
    learner = make_learner(small_model, loss, gspo_eps_low=0.2, gspo_eps_high=0.2)
    before = params(learner)
    m = learner.train_step(mixed_groups(0))
    assert math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"]) and m["grad_norm"] > 0
    assert any(not torch.equal(t, before[n]) for n, t in params(learner).items())
    if metric:
        assert math.isfinite(m[metric])

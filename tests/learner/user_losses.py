"""User policy losses (`algorithm.policy_loss = "user_losses:NAME"`) for
test_policy_loss_user.py; importable because tests/learner/conftest.py puts this folder on
sys.path, as a user's module would be on the learner's PYTHONPATH."""

from __future__ import annotations

import torch

from microcoder.learner.algorithm.policy_loss import LossInput, LossOutput, LossParams


def ppo(x: LossInput, p: LossParams) -> LossOutput:
    """PPO's clipped objective with clip-higher, as a user would write it: −min(r·A, clip(r)·A)."""
    ratio = torch.exp(x.logp - x.old_logp)
    objective = torch.minimum(
        ratio * x.advantages, ratio.clamp(1 - p.eps_low, 1 + p.eps_high) * x.advantages
    )
    clipped = objective < ratio * x.advantages
    gap = (x.old_logp - x.behaviour_logp).where(x.mask, 0.0)
    return LossOutput(-objective, clipped, {"ratio": ratio.detach(), "behaviour_gap": gap})


def boom(x: LossInput, p: LossParams) -> LossOutput:
    """A user loss with a bug."""
    raise ZeroDivisionError("the user's bug")


def scalar(x: LossInput, p: LossParams) -> LossOutput:
    """A user loss that aggregates by itself (a scalar, not [T])."""
    return LossOutput(-(x.advantages * x.logp).sum(), x.mask)

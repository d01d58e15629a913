"""AdamW and the learning-rate schedule (linear warmup, then constant or cosine)."""

from __future__ import annotations

import math

import torch

from microcoder.learner.config import LearnerConfig
from microcoder.learner.offload import adamw


def lr_factor(step: int, warmup: int, schedule: str, total: int, min_ratio: float) -> float:
    """Multiplier of the peak lr at optimizer step `step` (0-based).

    Warmup: (step + 1) / warmup for step < warmup. Then constant 1, or cosine from 1 down to
    `min_ratio` over the remaining `total − warmup` steps (held at `min_ratio` afterwards).
    """
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    span = max(total - warmup, 1)
    progress = min((step - warmup) / span, 1.0)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_optimizer(
    params, cfg: LearnerConfig, total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over those of `params` that require a gradient (the adapters alone under
    learner.lora: frozen weights get no AdamW state), its moments in host memory with
    learner.offload = "optimizer" (learner/offload.py), and a LambdaLR following `lr_factor`."""
    params = [p for p in params if p.requires_grad]
    optimizer = adamw(
        params, cfg.offload, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, foreach=True
    )
    total = cfg.schedule_steps or total_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: lr_factor(s, cfg.warmup_steps, cfg.schedule, total, cfg.min_lr_ratio),
    )
    return optimizer, scheduler

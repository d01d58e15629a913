"""Plain single-process SFT that stops when the held-out pass rate enters a target window.

    train_sft(model, examples, cfg, evaluate, seed=..., pad_id=...) -> SFTOutcome

AdamW with linear warmup then a constant lr; loss = token mean of the cross-entropy over the
response tokens of the batch (prompt and padding masked). From step `eval_from` on, every
`eval_every` steps, `evaluate(model, step)` returns the held-out pass rate; the first value in
[target_low, target_high] stops training and the model is left in exactly that state. Where
SFT lands is seed-sensitive, which is why the stop is a window, not a step count.

Overshoot (a rate above the window): with `rollback`, the model, optimizer and scheduler go
back to the last below-window evaluation and evaluation becomes twice as frequent (down to every
step). Batches are a pure function of (seed, step), so the replay is the same trajectory.
No window after `max_steps` (or an overshoot that cannot be resolved) raises WarmStartError.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm import tqdm

from microcoder.learner.optim import lr_factor
from microcoder.learner.warmstart.config import WarmStartConfig
from microcoder.learner.warmstart.examples import IGNORE, SFTExample, batch_indices, collate

Evaluator = Callable[[torch.nn.Module, int], float]
"""(model, step) -> held-out pass rate in [0, 1]."""


class WarmStartError(RuntimeError):
    """The warm start could not reach the target window; the message says what to change."""


@dataclass
class SFTOutcome:
    """Where the warm start stopped."""

    step: int
    """Optimizer step of the kept state (the evaluation that entered the window)."""
    pass_rate: float
    """Held-out pass rate measured at `step`."""
    evals: list[tuple[int, float]] = field(default_factory=list)
    """Every (step, pass rate) measured, in order (rolled-back ones included)."""
    losses: list[float] = field(default_factory=list)
    """Training loss of every step run, in order (replayed steps included)."""
    steps_run: int = 0
    """Optimizer steps executed in total (more than `step` after a rollback)."""
    train_s: float = 0.0
    """Seconds in forward/backward/optimizer."""
    eval_s: float = 0.0
    """Seconds in evaluation."""


def sft_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over the positions whose label is not IGNORE."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    targets = batch["labels"][:, 1:]
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
        targets.reshape(-1),
        ignore_index=IGNORE,
    )


@dataclass
class _Snapshot:
    step: int
    model: dict
    optimizer: dict
    scheduler: dict


def _snapshot(step, model, optimizer, scheduler) -> _Snapshot:
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return _Snapshot(step, weights, copy.deepcopy(optimizer.state_dict()), scheduler.state_dict())


def _restore(snap: _Snapshot, model, optimizer, scheduler) -> None:
    model.load_state_dict(snap.model)
    optimizer.load_state_dict(copy.deepcopy(snap.optimizer))
    scheduler.load_state_dict(snap.scheduler)


def train_sft(
    model: torch.nn.Module,
    examples: Sequence[SFTExample],
    cfg: WarmStartConfig,
    evaluate: Evaluator,
    *,
    seed: int,
    pad_id: int,
    progress: bool = True,
) -> SFTOutcome:
    """Train until the window is entered (see the module docstring); returns the outcome."""
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, cfg.warmup_steps, "constant", cfg.max_steps, 1.0)
    )
    out = SFTOutcome(step=0, pass_rate=float("nan"))
    bar = _Progress(cfg.max_steps, progress)
    step = 0
    interval = cfg.eval_every
    next_eval = cfg.eval_from
    snap = None
    try:
        while step < cfg.max_steps:
            step += 1
            t0 = time.perf_counter()
            idx = batch_indices(seed, step, len(examples), cfg.batch_size)
            loss = sft_loss(model, collate([examples[i] for i in idx], pad_id))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            out.losses.append(loss.item())
            out.steps_run += 1
            out.train_s += time.perf_counter() - t0
            bar.update(step, out.losses[-1])
            if step != next_eval:
                continue
            t0 = time.perf_counter()
            rate = float(evaluate(model, step))
            out.eval_s += time.perf_counter() - t0
            out.evals.append((step, rate))
            bar.evaluated(rate)
            if cfg.target_low <= rate <= cfg.target_high:
                out.step = step
                out.pass_rate = rate
                return out
            if rate > cfg.target_high:
                if not (cfg.rollback and snap is not None and interval > 1):
                    raise WarmStartError(_overshoot_message(cfg, step, rate, out.evals))
                _restore(snap, model, optimizer, scheduler)
                step = snap.step
                interval = max(1, interval // 2)
            elif cfg.rollback:
                snap = _snapshot(step, model, optimizer, scheduler)
            next_eval = step + interval
    finally:
        bar.close()
    raise WarmStartError(
        f"the held-out pass rate never entered [{cfg.target_low}, {cfg.target_high}] within "
        f"max_steps={cfg.max_steps} (evaluations (step, rate): {_fmt(out.evals)}). Raise "
        "max_steps or lr, widen the window, or try another seed."
    )


def _fmt(evals: list[tuple[int, float]]) -> str:
    return ", ".join(f"({s}, {r:.3f})" for s, r in evals[-8:]) or "none"


def _overshoot_message(cfg: WarmStartConfig, step: int, rate: float, evals) -> str:
    return (
        f"the held-out pass rate jumped over the window [{cfg.target_low}, {cfg.target_high}]: "
        f"{rate:.3f} at step {step} (evaluations (step, rate): {_fmt(evals)}). Evaluate earlier "
        "and more often (lower eval_from / eval_every), lower lr, or widen the window."
    )


class _Progress:
    """A tqdm bar (step, loss, last eval) on stderr; silent when disabled."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        self.last = "-"
        if enabled:
            self.bar = tqdm(total=total, desc="warm start", unit="step", dynamic_ncols=True)

    def update(self, step: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.n = step
            self.bar.set_postfix_str(f"loss {loss:.3f} | held-out {self.last}")

    def evaluated(self, rate: float) -> None:
        self.last = f"{rate:.3f}"
        if self.bar is not None:
            self.bar.set_postfix_str(f"held-out {self.last}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

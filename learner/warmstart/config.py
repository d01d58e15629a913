"""Settings of the supervised warm start (section `[warmstart]`): SFT until the window is hit."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from microcoder.config import Section
from microcoder.data.sources import SYNTHETIC_VARIANTS


class WarmStartConfig(Section):
    family: str = "synthetic"
    """The synthetic task family the model is fine-tuned and evaluated on and its tokenizer is
    trained on: a `data.source` name of data/sources.py SYNTHETIC_VARIANTS (`synthetic`, or
    `synthetic-long` for configs/compare-long.toml; then set eval_max_new_tokens to the run's
    generator.max_response_tokens, 96 there)."""
    batch_size: int = Field(32, ge=1)
    """(prompt, solution) pairs per optimizer step."""
    lr: float = Field(1e-3, gt=0)
    """AdamW peak learning rate (after warmup), constant afterwards."""
    warmup_steps: int = Field(50, ge=0)
    """Linear warmup length in optimizer steps."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    grad_clip: float = Field(1.0, gt=0)
    """Max global gradient norm."""
    max_steps: int = Field(600, ge=1)
    """Give up (with an error) when the window was not entered after this many steps."""
    eval_from: int = Field(60, ge=1)
    """First step after which the held-out pass rate is measured (before it, it is ~0: seed 0
    measured 0.000 at steps 40, 50 and 60 and entered the window at 150)."""
    eval_every: int = Field(10, ge=1)
    """Measure the held-out pass rate every N steps from `eval_from` on."""
    eval_problems: int = Field(160, ge=1)
    """Held-out problems in the fixed evaluation subset (one sample each)."""
    eval_temperature: float = Field(1.0, gt=0)
    """Sampling temperature of the held-out evaluation (pure temperature: no top-k/top-p)."""
    eval_max_new_tokens: int = Field(64, ge=1)
    """Generation stops here during evaluation (a truncated response usually fails)."""
    eval_batch_size: int = Field(160, ge=1)
    """Prompts generated together in one transformers `generate` call."""
    target_low: float = Field(0.2, ge=0, le=1)
    """The warm start stops at the first evaluation with pass rate >= target_low ..."""
    target_high: float = Field(0.45, ge=0, le=1)
    """... and <= target_high. Above it (overshoot) training rolls back to the previous
    evaluation and evaluates every step from there (see `rollback`)."""
    rollback: bool = True
    """On overshoot, restore the last below-window state and evaluate more often from there."""
    threads: int = Field(0, ge=0)
    """torch CPU threads; 0 = auto: all cores when the machine is quiet at start (1-minute load
    average below 1), else 1 (OpenMP threads competing for busy cores run many times slower)."""
    vocab_size: int = Field(1024, ge=300)
    """BPE vocabulary budget; the synthetic corpus saturates near 550 tokens."""

    @field_validator("family")
    @classmethod
    def _known_family(cls, value: str) -> str:
        if value not in SYNTHETIC_VARIANTS:
            raise ValueError(
                f"warmstart.family = {value!r}: set it to one of {', '.join(SYNTHETIC_VARIANTS)}"
            )
        return value

    @model_validator(mode="after")
    def _window_is_ordered(self) -> WarmStartConfig:
        if self.target_low > self.target_high:
            raise ValueError(
                f"target_low ({self.target_low}) must be <= target_high ({self.target_high})"
            )
        return self

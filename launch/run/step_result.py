"""What one learner step gives the training loop (launch/run/training_loop.py), typed: the
values the loop steers on apart from the metrics it logs.

    StepResult.of(metrics) -> StepResult      (metrics: the learner's dict, as from the ranks)

The learner's metrics travel from the ranks as one dict; `LearnerGroup.step`
(launch/run/learner_group.py) reads it once, here, and returns the typed result, whose fields
the training loop asks:
- `skipped`: no learning signal (every fetched group filtered, learner/trainer.py): no optimizer
  step, the version unchanged; the loop counts it against `algorithm.all_filtered_patience`
  (`filtered_groups` and `reward_mean` say why, the stop's message measures the pass rate);
- `update_skipped`, `skipped_in_a_row`: the non-finite guard skipped the update
  (`learner.max_skipped_steps` in a row stop the run);
- `version`, `diversity`: the policy version the step made, and the batch's diversity the
  temperature monitor observes;
- `rollouts`: rank 0's rollouts rows on a `monitor.rollouts_every` step (actors/rollouts.py
  writes them), never logged;
- `metrics`: the fields of the step's "step" record (launch/monitor/metrics_log.py), everything
  the learner measured but the rollouts; `update_skipped` and `skipped_in_a_row` stay in it too,
  as the record has always carried them (learner/config.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TIMINGS = ("wait_s", "compute_s", "sync_s")
"""The step's seconds the loop sums over the run (its summary)."""


@dataclass(frozen=True)
class StepResult:
    """One learner step, read once (`of`); see the module docstring."""

    version: int
    """The policy version after the step (unchanged when `skipped`)."""
    skipped: bool = False
    """No learning signal: every fetched group had equal rewards; no optimizer step."""
    update_skipped: bool = False
    """The non-finite guard skipped this step's update (weights and AdamW state unchanged)."""
    skipped_in_a_row: int = 0
    """Updates skipped by the guard in a row, this one included."""
    filtered_groups: float = 0.0
    reward_mean: float = 0.0
    diversity: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    """`TIMINGS`: wait, compute and sync seconds."""
    rollouts: list[Any] | None = None
    """Rank 0's rollouts rows (a `monitor.rollouts_every` step), else None."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """The "step" record's fields from the learner (no rollouts, no `skipped` flag)."""

    @classmethod
    def of(cls, m: dict[str, Any]) -> StepResult:
        """Read the learner's step dict (not changed)."""
        metrics = {k: v for k, v in m.items() if k not in ("rollouts", "skipped")}
        return cls(
            version=int(m["version"]),
            skipped=bool(m.get("skipped")),
            update_skipped=bool(m.get("update_skipped")),
            skipped_in_a_row=int(m.get("skipped_in_a_row", 0)),
            filtered_groups=float(m.get("filtered_groups", 0.0)),
            reward_mean=float(m.get("reward_mean", 0.0)),
            diversity=m.get("diversity"),
            timings={k: float(m.get(k, 0.0)) for k in TIMINGS},
            rollouts=m.get("rollouts"),
            metrics=metrics,
        )

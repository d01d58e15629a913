"""Diversity-determined temperature (MicroCoder-GRPO, arXiv 2603.07777; docs/architecture.md §5).

The paper's findings: a temperature too low lets the diversity of sampled groups decay and
training collapses; the best temperature is one whose diversity stays stable; staged low→high
steps beat a continuous ramp. This module holds the three mechanisms, as plain logic with no
engine inside (the generator actor supplies measurements):

(a) `calibrate(candidates, target, measure)`: before step 1, measure the diversity at each
    candidate temperature (ascending) and pick the LOWEST whose diversity reaches the target;
    if none does, pick the highest candidate and say so.
(b) a staged schedule: [(s, T), ...]: once s learner steps are done, that temperature (the
    step records s+1 on carry it). A stage overrides whatever is in force, calibrated or not.
(c) an online monitor: after `window` consecutive steps with diversity below the target, step
    the temperature up to the next higher candidate (bounded by the highest), then wait another
    full window before the next step-up. It climbs from whatever is in force (the calibrated T, a
    stage's T, or its own last step-up); a later stage still overrides it. It steps up at most
    `max_changes` times in a run (0 = no limit), after which it only watches: diversity falls
    at any fixed T over a long run (the paper's finding), so an unbounded monitor would climb
    to the top of the ladder in a continuous ramp, which the paper warns against; staged steps,
    rarely, are what it recommends. The window "auto" (`resolve_window`) scales with the run:
    a tenth of max_steps, at least AUTO_MIN_WINDOW steps.

Every change is returned as a `TemperatureChange` (the launcher logs it as an event record).

Diversity is `learner.diversity.batch_diversity` (1 − mean pairwise token-3-gram Jaccard).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace


@dataclass
class CalibrationResult:
    chosen: float
    """The temperature picked."""
    table: list[tuple[float, float]]
    """(temperature, measured diversity) for every candidate, ascending."""
    reached_target: bool
    """False when no candidate reached the target (then `chosen` is the highest)."""

    def format(self, target: float) -> str:
        lines = [f"temperature calibration (target diversity {target:.3f}):"]
        for t, d in self.table:
            mark = "  <- chosen" if t == self.chosen else ""
            lines.append(f"  T={t:<5g} diversity={d:.3f}{mark}")
        if not self.reached_target:
            lines.append(
                "  no candidate reached the target: using the highest; add higher candidates"
            )
        return "\n".join(lines)


def calibrate(
    candidates: Sequence[float], target: float, measure: Callable[[float], float]
) -> CalibrationResult:
    """Measure diversity at each candidate (ascending) and pick the lowest reaching `target`."""
    if not candidates:
        raise ValueError("algorithm.temperature.candidates is empty; list at least one temperature")
    table = [(t, float(measure(t))) for t in sorted(candidates)]
    for t, d in table:
        if d >= target:
            return CalibrationResult(chosen=t, table=table, reached_target=True)
    return CalibrationResult(chosen=table[-1][0], table=table, reached_target=False)


@dataclass(frozen=True)
class TemperatureChange:
    """One change of the temperature in force (or a step-up the ladder had no room for)."""

    step: int
    """Learner steps done when it happened."""
    cause: str
    """What made it: one of CAUSES."""
    before: float
    """Temperature in force before."""
    after: float
    """Temperature in force after (equal to `before` when the monitor is at the top)."""
    message: str
    """The human-readable line (also in `TemperatureController.events`)."""


AUTO_MIN_WINDOW = 5
"""The shortest window "auto" gives: one noisy batch's diversity (a few groups on the tiny
config) must not move T."""

AUTO_WINDOW_SHARE = 10
"""The window "auto" is max_steps // this many steps (at least AUTO_MIN_WINDOW)."""


def resolve_window(window: int | str, max_steps: int) -> int:
    """The monitor window in steps: `window` itself, or for "auto" a tenth of the run's
    `max_steps`, at least AUTO_MIN_WINDOW (5 up to a 59-step run, 50 in a 500-step one)."""
    if window == "auto":
        return max(AUTO_MIN_WINDOW, max_steps // AUTO_WINDOW_SHARE)
    return int(window)


RESUMED_FIELDS = ("temperature", "below", "changes", "events")
"""What a resumed run takes from the checkpoint's state; the ladder, target, window and schedule
come from the resumed run's config (so `--resume RUN_DIR --set algorithm.temperature.X=...`
acts)."""

CAUSES = {
    "schedule": "a stage of algorithm.temperature.schedule began",
    "monitor": "diversity stayed below the target for monitor_window steps",
    "resume": "the state was loaded from the checkpoint a resumed run continues",
}
"""Why the temperature changed, by `TemperatureChange.cause`."""


@dataclass
class TemperatureController:
    """Current sampling temperature, driven by a staged schedule and the online monitor."""

    temperature: float
    """Temperature in force now."""
    candidates: list[float]
    """The ladder the monitor climbs (sorted ascending)."""
    target: float
    """Diversity the monitor keeps the groups at."""
    window: int = 0
    """Consecutive below-target steps before a step-up; 0 disables the monitor."""
    schedule: list[tuple[int, float]] = field(default_factory=list)
    """Staged schedule [(step, T)], applied when `step` is reached."""
    max_changes: int = 0
    """Step-ups the monitor may make in a run (0 = no limit); then it only watches."""
    below: int = 0
    """Consecutive steps observed below target so far."""
    changes: int = 0
    """Step-ups the monitor made so far (a step-up at the top of the ladder is no change)."""
    events: list[str] = field(default_factory=list)
    """Human-readable log of every change (also returned by `observe`)."""

    def __post_init__(self) -> None:
        self.candidates = sorted(self.candidates)
        self.schedule = sorted((int(s), float(t)) for s, t in self.schedule)

    def start_step(self, step: int) -> TemperatureChange | None:
        """`step` learner steps are done: apply the schedule stage listed at `step`, if any.
        The temperature to sample with is then `self.temperature`."""
        change = None
        for s, t in self.schedule:
            if s == step and t != self.temperature:
                msg = f"step {step}: schedule sets temperature {self.temperature:g} -> {t:g}"
                change = self._record(step, "schedule", t, msg)
                self.below = 0
        return change

    def observe(self, step: int, diversity: float) -> TemperatureChange | None:
        """Record the step's diversity; step the temperature up when the window is exhausted."""
        if self.window <= 0 or 0 < self.max_changes <= self.changes:
            return None
        self.below = self.below + 1 if diversity < self.target else 0
        if self.below < self.window:
            return None
        self.below = 0
        higher = [c for c in self.candidates if c > self.temperature]
        head = (
            f"step {step}: diversity {diversity:.3f} below target {self.target:.3f} for "
            f"{self.window} steps"
        )
        if not higher:
            msg = f"{head} but temperature {self.temperature:g} is the highest candidate"
            return self._record(step, "monitor", self.temperature, msg)
        self.changes += 1
        msg = f"{head}: temperature {self.temperature:g} -> {higher[0]:g}"
        if self.changes == self.max_changes:
            msg += f" (the monitor's last step-up: monitor_max_changes = {self.max_changes})"
        return self._record(step, "monitor", higher[0], msg)

    def _record(self, step: int, cause: str, after: float, msg: str) -> TemperatureChange:
        change = TemperatureChange(step, cause, self.temperature, after, msg)
        self.temperature = after
        self.events.append(msg)
        return change

    def state_dict(self) -> dict:
        """Everything needed to resume (goes into checkpoints)."""
        return asdict(self)

    def resumed(self, state: dict) -> TemperatureController:
        """This controller (built from the config) continuing the saved `state`: its
        RESUMED_FIELDS from `state`, the rest from here."""
        return replace(self, **{k: state[k] for k in RESUMED_FIELDS if k in state})


def controller_for(settings, temperature: float, max_steps: int) -> TemperatureController:
    """The controller of a run: `settings` is its TemperatureConfig (`algorithm.temperature`),
    sampling at `temperature` first, the window resolved against the run's `max_steps`."""
    return TemperatureController(
        temperature=temperature,
        candidates=list(settings.candidates),
        target=settings.target_diversity,
        window=resolve_window(settings.monitor_window, max_steps),
        schedule=[tuple(s) for s in settings.schedule],
        max_changes=settings.monitor_max_changes,
    )

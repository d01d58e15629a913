"""Select the hard-but-solvable problems by pass rate (the `select` step of `data filter`).

The rules, in order (each removed problem gets one reason):
1. `always_solved`: every sample passed (a predicted rate that rounds to K of K). Nothing to
   learn from, removed whatever the band.
2. `below_band` / `above_band`: the rate is outside --keep LOW-HIGH (inclusive). A never-solved
   problem has rate 0, so it is in the band only when LOW is 0.
3. `unsolved_cap`: never-solved problems (0 of K, or a predicted rate that rounds to 0) in the
   band are kept up to --max-unsolved-share of the output; which ones is a seeded random draw.
4. `not_scored`: no measured or predicted rate (e.g. its prompt was too long to sample).

Everything else in the band is kept: the target mix is the band itself with at most S never-
solved (no resampling within the band, so the kept set is the measured distribution cut to the
band). The output keeps the input order. The same inputs and seed give the same selection.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from microcoder.data.problem import Problem

BANDS = (
    ("unsolved", 0.0, 0.0),
    ("(0, 0.25]", 0.0, 0.25),
    ("(0.25, 0.5]", 0.25, 0.5),
    ("(0.5, 0.75]", 0.5, 0.75),
    ("(0.75, 1)", 0.75, 1.0),
    ("always_solved", 1.0, 1.0),
)
"""Report bands: (name, low exclusive, high inclusive); the first and last are exact 0 and 1."""


@dataclass
class Score:
    """A problem's pass rate for selection."""

    rate: float
    """Measured passed/K, or the predictor's estimate."""
    measured: bool
    """True: measured with K samples; False: predicted."""


def parse_band(text: str) -> tuple[float, float]:
    """'LOW-HIGH' -> (low, high) with 0 <= low <= high <= 1; ValueError with the fix."""
    try:
        low, high = (float(x) for x in text.split("-"))
    except ValueError:
        raise ValueError(f"--keep {text!r}: expected LOW-HIGH, e.g. 0.0-0.9") from None
    if not 0 <= low <= high <= 1:
        raise ValueError(f"--keep {text!r}: need 0 <= LOW <= HIGH <= 1")
    return low, high


def effective_rate(score: Score, samples: int) -> float:
    """The rate selection uses: measured as is; predicted rounded to the nearest k/K (so that
    'never solved' and 'always solved' mean the same for both)."""
    if score.measured:
        return score.rate
    return round(score.rate * samples) / samples


def band_of(rate: float) -> str:
    """The report band of an effective rate."""
    if rate <= 0:
        return BANDS[0][0]
    if rate >= 1:
        return BANDS[-1][0]
    return next(name for name, lo, hi in BANDS[1:-1] if lo < rate <= hi)


@dataclass
class Selection:
    """What `select` kept and removed."""

    kept: list[Problem]
    """The selected problems, in input order."""
    removed: list[dict] = field(default_factory=list)
    """{"id", "reason", "rate"} per removed problem."""
    before: dict[str, int] = field(default_factory=dict)
    """Problems per band before selection (`not_scored` for those without a rate)."""
    after: dict[str, int] = field(default_factory=dict)
    """Problems per band after selection."""

    @property
    def reasons(self) -> dict[str, int]:
        """Removed problems per reason."""
        return dict(Counter(r["reason"] for r in self.removed))


@dataclass(frozen=True)
class Rules:
    """The settings of the rules (the module doc; `data filter`'s flags of the same names)."""

    samples: int
    """K: samples per measured problem (a predicted rate is rounded to a count of K)."""
    keep: tuple[float, float]
    """--keep LOW-HIGH, the band of rates kept (inclusive)."""
    max_unsolved_share: float
    """--max-unsolved-share: never-solved problems kept at most this share of the output."""
    seed: int
    """Seed of the draw of the never-solved problems kept."""


def select(problems: Sequence[Problem], scores: dict[str, Score], rules: Rules) -> Selection:
    """Apply the rules of the module doc."""
    share = rules.max_unsolved_share
    if not 0 <= share <= 1:
        raise ValueError(f"--max-unsolved-share {share}: give a share in [0, 1]")
    low, high = rules.keep
    removed = []
    candidates = []
    unsolved = []
    rates: dict[str, float] = {}
    for p in problems:
        if p.id not in scores:
            removed.append({"id": p.id, "reason": "not_scored", "rate": None})
            continue
        r = rates[p.id] = effective_rate(scores[p.id], rules.samples)
        reason = (
            "always_solved"
            if r >= 1
            else "below_band"
            if r < low
            else "above_band"
            if r > high
            else None
        )
        if reason:
            removed.append({"id": p.id, "reason": reason, "rate": scores[p.id].rate})
        elif r <= 0:
            unsolved.append(p.id)
        else:
            candidates.append(p.id)
    cap = _unsolved_cap(len(candidates), len(unsolved), share)
    chosen = set(random.Random(rules.seed).sample(sorted(unsolved), cap))
    removed += [
        {"id": i, "reason": "unsolved_cap", "rate": scores[i].rate}
        for i in unsolved
        if i not in chosen
    ]
    kept_ids = set(candidates) | chosen
    kept = [p for p in problems if p.id in kept_ids]
    return Selection(
        kept=kept,
        removed=removed,
        before=_bands([rates.get(p.id) for p in problems]),
        after=_bands([rates[p.id] for p in kept]),
    )


def _unsolved_cap(solvable: int, unsolved: int, share: float) -> int:
    """The most never-solved problems that keep their share of the output at or below `share`."""
    if share >= 1:
        return unsolved
    return min(unsolved, math.floor(share * solvable / (1 - share) + 1e-9))


def _bands(rates: Sequence[float | None]) -> dict[str, int]:
    counts = Counter("not_scored" if r is None else band_of(r) for r in rates)
    out = {name: counts.get(name, 0) for name, _, _ in BANDS}
    if counts.get("not_scored"):
        out["not_scored"] = counts["not_scored"]
    return out

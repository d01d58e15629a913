"""A deterministic held-out split of a problem file: chosen by problem id, not by position.

`holdout_split(problems, fraction)` puts a problem in the held-out part when the CRC-32 of its
id falls in the lowest `fraction` of the range, so the split does not depend on the file's
order, on other problems, or on a seed: the same id is held out in every run and every tool.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from microcoder.data.problem import Problem


def is_held_out(problem_id: str, fraction: float) -> bool:
    """True when `problem_id` belongs to the held-out `fraction` (0 <= fraction < 1)."""
    return zlib.crc32(problem_id.encode()) < fraction * 2**32


def holdout_split(
    problems: Sequence[Problem], fraction: float
) -> tuple[list[Problem], list[Problem]]:
    """(train, held-out): the problems whose id is held out at `fraction` go to the second."""
    if not 0 <= fraction < 1:
        raise ValueError(f"holdout fraction must be in [0, 1), got {fraction}")
    train = []
    held = []
    for p in problems:
        (held if is_held_out(p.id, fraction) else train).append(p)
    return train, held

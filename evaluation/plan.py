"""What is left to do: samples to generate (with the budgets still to judge), and how the
generation work is cut into calls (pure)."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from microcoder.data.problem import Problem
from microcoder.evaluation.samples import Key


@dataclass
class Todo:
    """Samples of one problem still to generate, and for each the budgets still to judge."""

    problem: Problem
    sample_indices: list[int]
    budgets: dict[int, list[int | None]]
    """sample_index -> budgets without a judged record yet."""


def plan_samples(
    problems: Sequence[Problem], samples: int, budgets: Sequence[int | None], done: Collection[Key]
) -> list[Todo]:
    """One Todo per problem that still misses a (sample, budget) record; a sample with some
    budgets judged is generated again and judged only at the missing ones (each record is a
    valid draw at its budget, so nothing is judged twice)."""
    out = []
    for p in problems:
        missing = {i: [b for b in budgets if (p.id, i, b) not in done] for i in range(samples)}
        missing = {i: bs for i, bs in missing.items() if bs}
        if missing:
            out.append(Todo(p, sorted(missing), missing))
    return out


def next_chunk(todos: Sequence[Todo], start: int, per_call: int, parallel: int) -> int:
    """End index of the next chunk of `todos[start:]` for one generator call: about
    `per_call` sequences, but no more than 1/`parallel` of what is left, so the last calls get
    small and the judging that follows the last one is short."""
    left = sum(len(t.sample_indices) for t in todos[start:])
    target = max(1, min(per_call, math.ceil(left / max(1, parallel))))
    end = start
    seqs = 0
    while end < len(todos) and (seqs == 0 or seqs + len(todos[end].sample_indices) <= target):
        seqs += len(todos[end].sample_indices)
        end += 1
    return end

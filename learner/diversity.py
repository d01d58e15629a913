"""Diversity of a group of responses, the signal of the diversity-determined temperature.

See docs/architecture.md §5 for where it fits in MicroCoder-GRPO.

Definition (the one the temperature controller uses everywhere):

    D(group) = 1 − mean over unordered pairs {i, j}, i ≠ j, of J(S_i, S_j)
    S_i      = the set of token n-grams (n = 3 by default) of response i
    J(A, B)  = |A ∩ B| / |A ∪ B|, with J(∅, ∅) = 1 (two responses too short to have an n-gram
               are identical in this view) and J(A, ∅) = 0 for non-empty A.

D lies in [0, 1]: 0 when all responses have the same n-gram set (e.g. identical responses),
1 when no two responses share an n-gram. A group of fewer than two responses has D = 0 (no
pair to be distinct). Sets, not multisets: a response that loops on one phrase has few distinct
n-grams, so loops do not inflate diversity.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations


def ngram_set(tokens: Sequence[int], n: int = 3) -> frozenset[tuple[int, ...]]:
    """The set of contiguous token n-grams of `tokens` (empty when len(tokens) < n)."""
    return frozenset(tuple(tokens[k : k + n]) for k in range(len(tokens) - n + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a ∩ b| / |a ∪ b|, with J(∅, ∅) = 1."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def group_diversity(responses: Sequence[Sequence[int]], n: int = 3) -> float:
    """D = 1 − mean pairwise Jaccard similarity of token n-gram sets (see the module docstring)."""
    if n < 1:
        raise ValueError(f"n-gram size must be at least 1, got {n}")
    sets = [ngram_set(r, n) for r in responses]
    pairs = list(combinations(sets, 2))
    if not pairs:
        return 0.0
    return 1.0 - sum(jaccard(a, b) for a, b in pairs) / len(pairs)


def batch_diversity(groups: Sequence[Sequence[Sequence[int]]], n: int = 3) -> float:
    """Mean of group_diversity over groups (0 for no groups): the per-step value that is logged."""
    if not groups:
        return 0.0
    return sum(group_diversity(g, n) for g in groups) / len(groups)

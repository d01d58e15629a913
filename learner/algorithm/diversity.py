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

import numpy as np


def ngram_sets(responses: Sequence[Sequence[int] | np.ndarray], n: int = 3) -> list[np.ndarray]:
    """The set of contiguous token n-grams of each response, as sorted arrays of unique int64
    keys that are equal exactly when the n-grams are equal *within this group* (tokens are first
    renumbered densely over the group, so a key is the n-gram written in base = the group's
    distinct-token count; when base**n would not fit 63 bits, the n-gram's raw bytes are the key).
    Empty for a response shorter than n. Arrays in, no Python tuples: a 64 x 8 x 2,048-token
    batch takes a fraction of a second."""
    arrays = [np.asarray(r, dtype=np.int64).ravel() for r in responses]
    if not arrays:
        return []
    vocab, dense = np.unique(np.concatenate(arrays), return_inverse=True)
    base = max(len(vocab), 2)
    packed = n * np.log2(base) < 62
    sets = []
    start = 0
    for arr in arrays:
        ids = dense[start : start + len(arr)]
        start = start + len(arr)
        if len(ids) < n:
            sets.append(np.empty(0, np.int64))
            continue
        windows = np.lib.stride_tricks.sliding_window_view(ids, n)
        if packed:
            keys = windows @ (base ** np.arange(n - 1, -1, -1, dtype=np.int64))
        else:
            keys = np.ascontiguousarray(windows).view(np.dtype((np.void, 8 * n))).ravel()
        sets.append(np.unique(keys))
    return sets


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|a ∩ b| / |a ∪ b| of two key sets of one `ngram_sets` call, with J(∅, ∅) = 1."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    common = len(np.intersect1d(a, b, assume_unique=True))
    return common / (len(a) + len(b) - common)


def group_diversity(responses: Sequence[Sequence[int] | np.ndarray], n: int = 3) -> float:
    """D = 1 − mean pairwise Jaccard similarity of token n-gram sets (see the module docstring).
    Each response is a list of token ids or a 1-d integer array."""
    if n < 1:
        raise ValueError(f"n-gram size must be at least 1, got {n}")
    sets = ngram_sets(responses, n)
    pairs = [(a, b) for i, a in enumerate(sets) for b in sets[i + 1 :]]
    if not pairs:
        return 0.0
    return 1.0 - sum(jaccard(a, b) for a, b in pairs) / len(pairs)


def batch_diversity(groups: Sequence[Sequence[Sequence[int] | np.ndarray]], n: int = 3) -> float:
    """Mean of group_diversity over groups (0 for no groups): the per-step value that is logged."""
    if not groups:
        return 0.0
    return sum(group_diversity(g, n) for g in groups) / len(groups)

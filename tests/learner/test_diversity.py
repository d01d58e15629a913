"""The diversity metric: 1 − mean pairwise Jaccard of token 3-gram sets."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from microcoder.learner.algorithm.diversity import batch_diversity, group_diversity, ngram_sets


def test_identical_responses_have_zero_diversity():
    assert group_diversity([[1, 2, 3, 4]] * 4) == 0.0


def test_disjoint_responses_have_full_diversity():
    assert group_diversity([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == 1.0


def test_partial_overlap_matches_hand_computation():
    # {123, 234} vs {234, 345}: J = 1/3; one pair -> D = 2/3
    assert group_diversity([[1, 2, 3, 4], [2, 3, 4, 5]]) == pytest.approx(2 / 3)


def test_mean_is_over_all_pairs():
    # pairs: (a,a) J=1, (a,b) J=0, (a,b) J=0 -> D = 1 - 1/3
    a, b = [1, 2, 3], [4, 5, 6]
    assert group_diversity([a, a, b]) == pytest.approx(2 / 3)


def test_short_responses_count_as_identical_to_each_other():
    assert group_diversity([[1], [2, 3]]) == 0.0
    assert group_diversity([[1], [1, 2, 3]]) == 1.0


def test_single_response_has_zero_diversity():
    assert group_diversity([[1, 2, 3, 4]]) == 0.0


def test_ngrams_are_sets_so_loops_do_not_inflate_diversity():
    assert len(ngram_sets([[1, 2, 1, 2, 1, 2]])[0]) == 2  # {(1, 2, 1), (2, 1, 2)}


def _by_definition(responses, n):
    """The module docstring's definition written with Python sets of tuples (the reference)."""
    sets = [{tuple(r[k : k + n]) for k in range(len(r) - n + 1)} for r in responses]
    pairs = list(combinations(sets, 2))
    if not pairs:
        return 0.0
    sims = [1.0 if not a and not b else len(a & b) / len(a | b) for a, b in pairs]
    return 1.0 - sum(sims) / len(pairs)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 5), max_size=12), max_size=6),
    st.integers(1, 4),
)
def test_diversity_equals_the_set_definition(responses, n):
    assert group_diversity(responses, n) == pytest.approx(_by_definition(responses, n))


def test_long_ngrams_of_a_large_vocabulary_use_exact_byte_keys():
    rng = np.random.default_rng(1)
    group = [rng.integers(0, 10**6, size=100).tolist() for _ in range(4)]
    group.append(group[0][5:60])  # shares 8-grams; ~400 distinct ids: 8 x log2 > 62 bits
    assert group_diversity(group, 8) == pytest.approx(_by_definition(group, 8))


def test_arrays_and_lists_give_the_same_diversity():
    rng = np.random.default_rng(0)
    group = [rng.integers(0, 200_000, size=int(rng.integers(0, 50))) for _ in range(8)]
    assert group_diversity(group) == pytest.approx(group_diversity([g.tolist() for g in group]))


def test_batch_diversity_is_mean_over_groups():
    assert batch_diversity([[[1, 2, 3]] * 2, [[1, 2, 3], [4, 5, 6]]]) == pytest.approx(0.5)

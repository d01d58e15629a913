"""The diversity metric: 1 − mean pairwise Jaccard of token 3-gram sets."""

from __future__ import annotations

import pytest

from microcoder.learner.diversity import batch_diversity, group_diversity, ngram_set


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
    assert ngram_set([1, 2, 1, 2, 1, 2]) == {(1, 2, 1), (2, 1, 2)}


def test_batch_diversity_is_mean_over_groups():
    assert batch_diversity([[[1, 2, 3]] * 2, [[1, 2, 3], [4, 5, 6]]]) == pytest.approx(0.5)

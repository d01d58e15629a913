"""The unbiased pass@k estimator against hand computations (Chen et al. 2021)."""

from __future__ import annotations

from math import comb

import pytest

from microcoder.evaluation.passk import mean_pass_at_k, pass_at_k, pass_at_ks, usable_ks


def test_pass_at_1_is_the_fraction_correct():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)


def test_pass_at_k_matches_the_binomial_formula_by_hand():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    for n, c, k in [(10, 1, 5), (20, 7, 3), (8, 4, 8), (100, 13, 10)]:
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_no_correct_sample_gives_zero():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 0, 10) == 0.0


def test_all_correct_gives_one():
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(4, 4, 4) == 1.0


def test_k_equal_to_n_is_one_with_any_correct_sample():
    assert pass_at_k(5, 1, 5) == 1.0
    assert pass_at_k(5, 0, 5) == 0.0


def test_k_above_n_says_how_to_fix():
    with pytest.raises(ValueError, match="raise --samples to 5"):
        pass_at_k(3, 1, 5)


def test_problems_are_averaged_not_samples_pooled():
    # problem A: 1/1 correct, problem B: 0/3: mean of 1.0 and 0.0 (pooled would be 0.25)
    assert mean_pass_at_k([(1, 1), (3, 0)], 1) == pytest.approx(0.5)


def test_report_keys_are_strings_and_empty_is_none():
    assert pass_at_ks([(4, 2)], [1, 2]) == {"1": 0.5, "2": pytest.approx(1 - 1 / 6)}
    assert pass_at_ks([], [1]) == {"1": None}


def test_k_values_above_the_sample_count_are_split_off():
    assert usable_ks([1, 5, 10], 5) == ([1, 5], [10])

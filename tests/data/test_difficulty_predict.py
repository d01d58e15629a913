"""The metadata predictor: it recovers a planted relation and reports low agreement on noise."""

from __future__ import annotations

import numpy as np

from microcoder.data.difficulty.predict import agreement, fit_predictor, spearman
from microcoder.data.problem import Problem

LEVELS = {"easy": 1.5, "medium": 0.0, "hard": -1.5}


def corpus(n: int, seed: int):
    """Problems with random metadata; the planted rate depends on difficulty and length."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        diff = str(rng.choice(list(LEVELS)))
        words = int(rng.integers(5, 400))
        tests = int(rng.integers(1, 30))
        p = Problem(
            id=f"p{i}",
            kind="stdin",
            prompt=" ".join(["word"] * words),
            tests=[{"input": "", "output": ""}] * tests,
            difficulty=diff,
            platform=str(rng.choice(["codeforces", "atcoder"])),
            date=f"20{rng.integers(15, 25)}-0{rng.integers(1, 9)}-10",
        )
        out.append((p, LEVELS[diff] - 1.2 * (np.log1p(words) - 4.0)))
    return out


def draws(logits, k: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(rng.binomial(k, 1 / (1 + np.exp(-z)))) for z in logits]


def test_the_predictor_recovers_a_planted_relation():
    rows = corpus(300, seed=0)
    ps = [p for p, _ in rows]
    passed = draws([z for _, z in rows], 16, seed=1)
    a = agreement(ps, passed, [16] * len(ps), seed=0)
    assert a is not None and a.test == 75
    assert a.spearman > 0.8
    assert a.mae < 0.6 * a.baseline_mae


def test_the_predictor_reports_low_agreement_on_noise():
    rows = corpus(400, seed=2)
    ps = [p for p, _ in rows]
    passed = [int(x) for x in np.random.default_rng(3).integers(0, 9, len(ps))]
    a = agreement(ps, passed, [8] * len(ps), seed=0)
    assert a is not None and abs(a.spearman) < 0.3
    assert a.mae > 0.9 * a.baseline_mae


def test_predicted_rates_are_probabilities_even_for_unseen_metadata():
    rows = corpus(60, seed=4)
    ps = [p for p, _ in rows]
    model = fit_predictor(ps, draws([z for _, z in rows], 8, 5), [8] * len(ps))
    new = Problem(
        id="n", kind="stdin", prompt="", tests=[{"input": "", "output": ""}], difficulty="??"
    )
    r = model.predict([new, ps[0]])
    assert r.shape == (2,) and np.all((r > 0) & (r < 1))


def test_the_same_seed_gives_the_same_agreement():
    rows = corpus(80, seed=6)
    ps, passed = [p for p, _ in rows], draws([z for _, z in rows], 8, 7)
    assert agreement(ps, passed, [8] * 80, seed=3) == agreement(ps, passed, [8] * 80, seed=3)


def test_agreement_needs_at_least_four_problems():
    rows = corpus(3, seed=8)
    assert agreement([p for p, _ in rows], [1, 2, 3], [8] * 3, seed=0) is None


def test_spearman_is_one_for_a_monotone_relation_and_minus_one_reversed():
    assert spearman([1, 2, 3, 4], [10, 20, 35, 90]) == 1.0
    assert abs(spearman([1, 2, 3, 4], [4, 3, 2, 1]) + 1.0) < 1e-12


def test_spearman_of_a_constant_side_is_none():
    assert spearman([0.5, 0.5, 0.5, 0.5], [1, 2, 3, 4]) is None


def test_spearman_gives_ties_their_mean_rank():
    # ranks [0.5, 0.5, 2, 3] vs [0, 1, 2, 3]: Pearson of those = 0.9487
    assert abs(spearman([1, 1, 2, 3], [1, 2, 3, 4]) - 0.9486832980505138) < 1e-9

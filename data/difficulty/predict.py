"""Calibrate a pass-rate predictor from a problem's own metadata, so that a corpus too large to
sample can be scored from a measured sample (`microcoder data filter --predict-rest`).

Features (data/problem.py fields): declared difficulty, platform and source one-hot (the values
seen when fitting; an unseen value is all zeros), log(1 + statement characters), log(1 + test
count), and the date as a fractional year (missing dates get the fitted mean and a missing flag).
Numeric features are standardized on the fitting set.

Model: binomial logistic regression with an L2 penalty, fitted by Newton's method (numpy): each
problem contributes `passed` successes of `samples` trials, so the predicted rate is a
probability in (0, 1). Agreement: fit on a seeded split, score the held-out part by Spearman
rank correlation and mean absolute error (beside the MAE of predicting the training mean).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from microcoder.data.problem import Problem

CATEGORICAL = ("difficulty", "platform", "source")
"""Problem fields one-hot encoded."""
NUMERIC = ("log_statement_chars", "log_tests", "year", "date_missing")
"""Numeric features (standardized)."""


def _year(date: str) -> float | None:
    """'YYYY-MM-DD...' -> fractional year; None when not a date."""
    try:
        y = int(date[:4])
        m = int(date[5:7] or 1)
        d = int(date[8:10] or 1)
    except (ValueError, IndexError):
        return None
    if not (1900 < y < 2200 and 1 <= m <= 12):
        return None
    return y + (m - 1) / 12 + (min(d, 28) - 1) / 365


def _raw_numeric(p: Problem) -> list[float]:
    year = _year(p.date)
    return [
        math.log1p(len(p.prompt)),
        math.log1p(len(p.tests)),
        math.nan if year is None else year,
        1.0 if year is None else 0.0,
    ]


@dataclass
class Encoder:
    """The feature map fitted on a set of problems (categories seen, numeric mean and scale)."""

    categories: dict[str, list[str]]
    """Field -> the values one-hot encoded, in order."""
    mean: list[float]
    """Mean of each NUMERIC feature on the fitting set (the year's over known dates)."""
    scale: list[float]
    """Standard deviation of each NUMERIC feature (1.0 where constant)."""

    @classmethod
    def fit(cls, problems: Sequence[Problem]) -> Encoder:
        cats = {
            f: sorted({str(getattr(p, f)).strip().lower() for p in problems}) for f in CATEGORICAL
        }
        raw = np.array([_raw_numeric(p) for p in problems], dtype=float)
        known = ~np.isnan(raw)
        mean = np.where(known, raw, 0.0).sum(axis=0) / np.maximum(known.sum(axis=0), 1)
        filled = np.where(np.isnan(raw), mean, raw)
        scale = filled.std(axis=0)
        scale[scale < 1e-9] = 1.0
        return cls(cats, mean.tolist(), scale.tolist())

    @property
    def names(self) -> list[str]:
        """Feature names in column order (after the intercept)."""
        return [f"{f}={v}" for f in CATEGORICAL for v in self.categories[f]] + list(NUMERIC)

    def transform(self, problems: Sequence[Problem]) -> np.ndarray:
        """The design matrix, an intercept column first."""
        rows = []
        for p in problems:
            onehot = []
            for f in CATEGORICAL:
                value = str(getattr(p, f)).strip().lower()
                onehot += [1.0 if value == v else 0.0 for v in self.categories[f]]
            raw = np.array(_raw_numeric(p))
            raw = np.where(np.isnan(raw), self.mean, raw)
            rows.append([1.0, *onehot, *((raw - self.mean) / self.scale)])
        return np.array(rows, dtype=float).reshape(len(rows), 1 + len(self.names))


@dataclass
class Predictor:
    """A fitted pass-rate predictor: `predict(problems)` -> rates in (0, 1)."""

    encoder: Encoder
    """The feature map."""
    coef: list[float]
    """Logistic coefficients, intercept first (in Encoder.names order)."""
    l2: float = 1.0
    """The L2 penalty it was fitted with."""

    def predict(self, problems: Sequence[Problem]) -> np.ndarray:
        z = self.encoder.transform(problems) @ np.array(self.coef)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def fit_predictor(
    problems: Sequence[Problem], passed: Sequence[int], samples: Sequence[int], l2: float = 1.0
) -> Predictor:
    """Binomial logistic regression of passed/samples on the metadata features (Newton steps)."""
    if not problems:
        raise ValueError("fitting the predictor needs at least one measured problem")
    enc = Encoder.fit(problems)
    x = enc.transform(problems)
    c = np.asarray(passed, dtype=float)
    n = np.asarray(samples, dtype=float)
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0  # the intercept is not shrunk
    beta = np.zeros(x.shape[1])
    beta[0] = math.log((c.sum() + 0.5) / (n.sum() - c.sum() + 0.5))
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ beta, -30, 30)))
        grad = x.T @ (n * p - c) + penalty * beta
        hess = (x * (n * p * (1 - p))[:, None]).T @ x + np.diag(penalty + 1e-8)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return Predictor(enc, beta.tolist(), l2)


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman rank correlation (ties get their mean rank); None when either side is constant
    or there are fewer than 3 pairs."""
    x = _ranks(np.asarray(a, dtype=float))
    y = _ranks(np.asarray(b, dtype=float))
    if len(x) < 3 or x.std() < 1e-12 or y.std() < 1e-12:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _ranks(v: np.ndarray) -> np.ndarray:
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v), dtype=float)
    _, inverse = np.unique(v, return_inverse=True)
    return (np.bincount(inverse, ranks) / np.bincount(inverse))[inverse]


@dataclass
class Agreement:
    """How well the predictor ranks and estimates held-out measured rates."""

    train: int
    """Problems the agreement fit used."""
    test: int
    """Held-out problems it was scored on."""
    spearman: float | None
    """Rank correlation of predicted vs measured rate on the held-out part (None: constant)."""
    mae: float
    """Mean absolute error of the predicted rate on the held-out part."""
    baseline_mae: float
    """MAE of predicting the training mean rate for every held-out problem (the bar to beat)."""
    seed: int
    """Seed of the split."""
    test_share: float
    """Share of the measured problems held out."""
    features: list[str] = field(default_factory=list)
    """Feature names of the model."""


def agreement(
    problems: Sequence[Problem],
    passed: Sequence[int],
    samples: Sequence[int],
    seed: int,
    test_share: float = 0.25,
) -> Agreement | None:
    """Fit on a seeded (1 - test_share) split, score on the rest; None under 4 problems."""
    n = len(problems)
    if n < 4:
        return None
    order = np.random.default_rng(seed).permutation(n)
    n_test = min(n - 2, max(1, round(test_share * n)))
    test = order[:n_test]
    train = order[n_test:]
    pick = lambda seq, idx: [seq[i] for i in idx]  # noqa: E731
    model = fit_predictor(pick(problems, train), pick(passed, train), pick(samples, train))
    measured = np.array(passed, dtype=float) / np.array(samples, dtype=float)
    predicted = model.predict(pick(problems, test))
    base = measured[train].mean()
    return Agreement(
        train=len(train),
        test=len(test),
        spearman=spearman(predicted, measured[test]),
        mae=float(np.abs(predicted - measured[test]).mean()),
        baseline_mae=float(np.abs(base - measured[test]).mean()),
        seed=seed,
        test_share=test_share,
        features=model.encoder.names,
    )

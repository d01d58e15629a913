"""The mismatch metrics (learner/algorithm/mismatch.py) against their formulas computed here directly with
numpy: mean |Δ log p|, the k3 estimate, the ratio quantiles (within half a histogram bin of the
exact inverted-CDF quantile), the fraction out of the band, per staleness and overall."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from microcoder.learner.algorithm import mismatch

CAP = 2.0


def direct(delta: np.ndarray) -> dict[str, float]:
    ratio = np.exp(delta)
    return {
        "abs_dlogp": float(np.abs(delta).mean()),
        "kl": float((ratio - 1 - delta).mean()),
        "out_of_band_frac": float(((ratio < 1 / CAP) | (ratio > CAP)).mean()),
        "ratio_p1": float(np.quantile(ratio, 0.01, method="inverted_cdf")),
        "ratio_p50": float(np.quantile(ratio, 0.5, method="inverted_cdf")),
        "ratio_p99": float(np.quantile(ratio, 0.99, method="inverted_cdf")),
    }


def check(got: dict[str, float], want: dict[str, float]) -> None:
    for k in ("abs_dlogp", "kl", "out_of_band_frac"):
        assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), k
    for k in ("ratio_p1", "ratio_p50", "ratio_p99"):  # half a bin in log space
        assert abs(math.log(got[k]) - math.log(want[k])) <= mismatch.BIN_WIDTH / 2 + 1e-9, k


def sums(learner, behaviour, stale, real=None):
    learner, behaviour = torch.tensor(learner), torch.tensor(behaviour)
    real = torch.ones(len(learner), dtype=torch.bool) if real is None else torch.tensor(real)
    return mismatch.mismatch_sums(learner, behaviour, torch.tensor(stale), real, CAP)


def test_metrics_match_the_formulas_overall_and_per_staleness():
    rng = np.random.default_rng(0)
    n = 3000
    behaviour = -rng.uniform(0.1, 6.0, n)
    stale = rng.integers(0, 3, n)
    delta = rng.normal(0.0, 0.05 + 0.3 * stale)  # older samples: a wider mismatch
    delta[:20] = [-1.2, 0.9] * 10  # some tokens out of the band [1/2, 2]
    learner = behaviour + delta
    # two micro-batches summed, as the trainer does
    half = n // 2
    total = sums(learner[:half], behaviour[:half], stale[:half]) + sums(
        learner[half:], behaviour[half:], stale[half:]
    )
    m = mismatch.mismatch_metrics(total)
    d = learner - behaviour  # what the learner sees, after float rounding
    check(
        {k[len("mismatch_") :]: v for k, v in m.items() if k != "mismatch_by_staleness"}, direct(d)
    )
    assert set(m["mismatch_by_staleness"]) == {"0", "1", "2"}
    for s in range(3):
        got = m["mismatch_by_staleness"][str(s)]
        assert got["tokens"] == (stale == s).sum()
        check(got, direct(d[stale == s]))
    by = m["mismatch_by_staleness"]
    assert by["0"]["kl"] < by["1"]["kl"] < by["2"]["kl"]


def test_tokens_that_are_not_real_add_nothing():
    with_extra = sums(
        [-1.0, -2.0, float("nan")], [-1.1, -1.9, -1.0], [0, 0, 0], [True, True, False]
    )
    alone = sums([-1.0, -2.0], [-1.1, -1.9], [0, 0])
    assert torch.equal(with_extra, alone)


def test_every_staleness_past_the_last_bucket_goes_into_it():
    last = mismatch.STALENESS_BUCKETS - 1
    m = mismatch.mismatch_metrics(sums([-1.0, -1.0, -1.0], [-1.0, -1.0, -1.5], [last, last + 5, 0]))
    assert m["mismatch_by_staleness"][f"{last}+"]["tokens"] == 2
    assert m["mismatch_by_staleness"]["0"]["abs_dlogp"] == pytest.approx(0.5)


def test_ratios_beyond_the_histogram_land_in_its_edge_bins():
    m = mismatch.mismatch_metrics(sums([0.0, -20.0], [-20.0, 0.0], [0, 0]))
    assert m["mismatch_ratio_p99"] == pytest.approx(math.exp(mismatch.LOG_RANGE))
    assert m["mismatch_ratio_p1"] == pytest.approx(math.exp(-mismatch.LOG_RANGE))
    assert m["mismatch_abs_dlogp"] == pytest.approx(20.0)  # the sums are exact
    assert m["mismatch_out_of_band_frac"] == 1.0


def test_no_tokens_gives_no_values():
    empty = torch.zeros(mismatch.SIZE, dtype=torch.float64)
    assert mismatch.mismatch_metrics(empty) == {"mismatch_by_staleness": {}, "mismatch_by_span": {}}


def test_by_span_splits_the_responses_an_update_split_from_the_others():
    # spanned tokens carry a wide mismatch (old KV under new weights), single ones a narrow one
    rng = np.random.default_rng(1)
    n = 2000
    behaviour = -rng.uniform(0.1, 6.0, n)
    spanned = rng.random(n) < 0.3
    delta = rng.normal(0.0, np.where(spanned, 0.4, 0.02))
    learner = behaviour + delta
    real = np.ones(n, dtype=bool)
    real[:7] = False  # not counted anywhere
    got = mismatch.mismatch_metrics(
        mismatch.mismatch_sums(
            torch.tensor(learner),
            torch.tensor(behaviour),
            torch.zeros(n, dtype=torch.long),  # one staleness: only the span tells them apart
            torch.tensor(real),
            CAP,
            torch.tensor(spanned),
        )
    )
    d = learner - behaviour
    for name, sel in (("single", ~spanned & real), ("spanned", spanned & real)):
        want = direct(d[sel])
        span = got["mismatch_by_span"][name]
        assert span["tokens"] == sel.sum()
        for k in ("abs_dlogp", "kl", "out_of_band_frac"):
            assert span[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), (name, k)
    assert got["mismatch_by_span"]["spanned"]["kl"] > 10 * got["mismatch_by_span"]["single"]["kl"]


def test_by_span_without_the_flag_counts_every_token_as_single():
    m = mismatch.mismatch_metrics(sums([-1.0, -2.0], [-1.5, -2.0], [0, 1]))
    assert set(m["mismatch_by_span"]) == {"single"}
    assert m["mismatch_by_span"]["single"]["tokens"] == 2
    assert m["mismatch_by_span"]["single"]["abs_dlogp"] == pytest.approx(0.25)

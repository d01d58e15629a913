"""The step's verdict metrics (learner/verdict_stats.py) against direct counts."""

from __future__ import annotations

import random

import pytest

from microcoder.learner.verdict_stats import (
    GROUP_PASS_BINS,
    VERDICT_LABELS,
    group_pass_hist,
    length_stats,
    pass_bin,
    step_verdict_metrics,
    verdict_counts,
)
from microcoder.sandbox.verdict import VERDICTS


def test_every_verdict_and_no_code_is_a_key_even_when_unseen():
    counts = verdict_counts(["AC", "AC", "WA"])
    assert set(counts) == set(VERDICTS) | {"no_code"} == set(VERDICT_LABELS)
    assert counts["AC"] == 2 and counts["WA"] == 1
    assert sum(counts.values()) == 3 and counts["TLE"] == counts["unfinished"] == 0


@pytest.mark.parametrize(
    "rate, label",
    [
        (0.0, "0%"),
        (0.1, "(0%,25%]"),
        (0.25, "(0%,25%]"),
        (0.26, "(25%,50%]"),
        (0.5, "(25%,50%]"),
        (0.75, "(50%,75%]"),
        (0.76, "(75%,100%)"),
        (0.999, "(75%,100%)"),
        (1.0, "100%"),
    ],
)
def test_pass_rate_bins_have_the_documented_edges(rate, label):
    assert GROUP_PASS_BINS[pass_bin(rate)] == label


def test_step_metrics_match_direct_counts_on_random_groups():
    rng = random.Random(0)
    labels = [*VERDICT_LABELS, "AC", "AC"]
    groups = []
    for _ in range(40):
        g = rng.choice([1, 4, 8])
        groups.append(
            ([rng.choice(labels) for _ in range(g)], [rng.randint(0, 500) for _ in range(g)])
        )
    m = step_verdict_metrics(groups)
    flat = [label for ls, _ in groups for label in ls]
    lengths = sorted(n for _, ns in groups for n in ns)
    for v in VERDICT_LABELS:
        direct = sum(1 for x in flat if x == v)
        assert m["verdict_counts"][v] == direct
        assert m["verdict_rates"][v] == pytest.approx(direct / len(flat))
    assert m["extraction_failed"] == sum(1 for x in flat if x in ("no_code", "unfinished"))
    assert m["response_len_max"] == lengths[-1]
    n = len(lengths)  # linear interpolation between closest ranks (numpy's default)
    pos = 0.5 * (n - 1)
    lo = lengths[int(pos)]
    hi = lengths[min(int(pos) + 1, n - 1)]
    assert m["response_len_p50"] == pytest.approx(lo + (hi - lo) * (pos - int(pos)))
    assert m["response_len_p50"] <= m["response_len_p90"] <= m["response_len_max"]
    hist = [0] * 6
    for ls, _ in groups:
        rate = ls.count("AC") / len(ls)
        i = (
            0
            if rate == 0
            else 5
            if rate == 1
            else 1
            if rate <= 0.25
            else 2
            if rate <= 0.5
            else 3
            if rate <= 0.75
            else 4
        )
        hist[i] += 1
    assert m["group_pass_hist"] == hist and sum(hist) == len(groups)


def test_no_groups_give_zero_counts_and_no_lengths():
    m = step_verdict_metrics([])
    assert set(m["verdict_counts"].values()) == {0} and set(m["verdict_rates"].values()) == {0.0}
    assert m["group_pass_hist"] == [0] * 6 and m["extraction_failed"] == 0
    assert "response_len_p50" not in m and length_stats([]) == {}


def test_group_pass_hist_counts_groups_not_responses():
    assert group_pass_hist([0.0, 0.0, 1.0, 0.5]) == [2, 0, 1, 0, 0, 1]

"""The staleness rule and the admission formula (docs/architecture.md §4)."""

from __future__ import annotations

import numpy as np

from microcoder.buffer.staleness import admission_capacity, staleness, within_bound
from microcoder.protocol import Group, Response


def test_staleness_is_consumer_version_minus_oldest_policy_version():
    assert staleness(7, 4) == 3


def test_a_mixed_version_group_is_as_stale_as_its_oldest_first_version():
    """Responses sampled across in-flight updates (first..last: 4..6 and 5..6): staleness at
    consumer version 6 counts from 4, not from any last version."""
    r = [
        Response(
            np.zeros(1, np.int32), np.zeros(1, np.float32), policy_version=f, last_policy_version=lv
        )
        for f, lv in ((5, 6), (4, 6))
    ]
    group = Group(1, "p", responses=r)
    assert group.min_policy_version == 4
    assert staleness(6, group.min_policy_version) == 2
    assert not within_bound(6, group.min_policy_version, 1)


def test_zero_staleness_accepts_only_current_version_groups():
    assert within_bound(5, 5, 0)
    assert not within_bound(5, 4, 0)


def test_bound_is_inclusive():
    assert within_bound(5, 3, 2)
    assert not within_bound(5, 2, 2)


def test_admission_starts_with_k_plus_one_batches():
    assert (
        admission_capacity(max_staleness=1, version=0, batch_size=8, trained=0, in_flight=0) == 16
    )


def test_admission_subtracts_trained_and_in_flight():
    assert admission_capacity(1, 2, 8, trained=16, in_flight=10) == 6


def test_admission_is_never_negative():
    assert admission_capacity(0, 0, 4, trained=0, in_flight=9) == 0

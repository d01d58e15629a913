"""One `Rates` (microcoder/rates.py) for both of its users: the training loop's plain pool rates
(launch/run/training_loop.py `pool_fields`) and the buffer's smoothed counter rates
(buffer/accounting.py `counter_rates`)."""

from __future__ import annotations

import pytest

from microcoder.buffer.accounting import RATE_KEYS, Counters, counter_rates
from microcoder.rates import Rates


def test_the_first_update_of_a_key_only_sets_its_reference():
    assert Rates().rate("tokens", 500, now=10.0) == 0.0


def test_the_plain_rate_is_the_change_since_the_previous_update_per_second():
    r = Rates()
    r.rate("tokens", 100, now=10.0)
    assert r.rate("tokens", 400, now=12.0) == 150.0
    assert r.rate("tokens", 400, now=13.0) == 0.0


def test_a_total_that_went_down_counts_as_no_change():
    r = Rates()
    r.rate("tests", 900, now=0.0)
    assert r.rate("tests", 30, now=1.0) == 0.0  # a replica restarted: its counter began again
    assert r.rate("tests", 90, now=2.0) == 60.0


def test_each_key_keeps_its_own_time():
    r = Rates()
    r.rate("a", 0, now=0.0)
    r.rate("b", 0, now=5.0)
    assert (r.rate("a", 10, now=10.0), r.rate("b", 10, now=10.0)) == (1.0, 2.0)


def test_alpha_below_one_smooths_the_rate():
    r = Rates(alpha=0.5)
    r.rate("x", 0, now=0.0)
    assert r.rate("x", 10, now=1.0) == 5.0  # 0.5 * 10 + 0.5 * 0
    assert r.rate("x", 30, now=2.0) == 12.5  # 0.5 * 20 + 0.5 * 5


def test_an_update_sooner_than_the_min_interval_is_ignored():
    r = Rates(min_interval_s=1.0)
    r.rate("x", 0, now=0.0)
    assert r.rate("x", 50, now=0.5) == 0.0
    assert r.rate("x", 100, now=2.0) == 50.0  # measured from t=0, not from the ignored update


def test_alpha_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="alpha"):
        Rates(alpha=0.0)


def test_the_buffer_reports_every_counter_rate_from_the_start():
    assert counter_rates().rates == dict.fromkeys(RATE_KEYS, 0.0)


def test_the_buffer_rates_are_smoothed_and_at_most_once_a_second():
    rates, c = counter_rates(), Counters()
    rates.update(100.0, c.rate_totals())
    c.consumed = 10
    assert rates.update(100.5, c.rate_totals())["consumed"] == 0.0
    assert rates.update(102.0, c.rate_totals())["consumed"] == pytest.approx(0.3 * 5.0)

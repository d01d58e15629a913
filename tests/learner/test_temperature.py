"""Diversity-determined temperature: calibration, staged schedule, online monitor."""

from __future__ import annotations

import pytest

from microcoder.learner.temperature import TemperatureController, calibrate

# A constructed diversity curve where the answer is known: diversity rises with temperature.
CURVE = {0.6: 0.10, 0.8: 0.25, 1.0: 0.42, 1.2: 0.55, 1.4: 0.70}


def test_calibration_picks_the_lowest_temperature_reaching_the_target():
    res = calibrate(list(CURVE), 0.5, CURVE.__getitem__)
    assert res.chosen == 1.2 and res.reached_target


def test_calibration_measures_every_candidate_in_ascending_order():
    seen = []
    calibrate([1.4, 0.6, 1.0], 0.0, lambda t: seen.append(t) or 1.0)
    assert seen == [0.6, 1.0, 1.4]


def test_calibration_falls_back_to_the_highest_when_none_reaches_target():
    res = calibrate(list(CURVE), 0.9, CURVE.__getitem__)
    assert res.chosen == 1.4 and not res.reached_target
    assert "no candidate reached" in res.format(0.9)


def test_calibration_rejects_an_empty_candidate_list():
    with pytest.raises(ValueError, match="candidates"):
        calibrate([], 0.5, CURVE.__getitem__)


def controller(**kw) -> TemperatureController:
    base = dict(temperature=1.0, candidates=[0.6, 1.0, 1.2, 1.4], target=0.5, window=3)
    return TemperatureController(**{**base, **kw})


def test_monitor_steps_up_after_window_consecutive_low_steps():
    c = controller()
    assert c.observe(1, 0.4) is None and c.observe(2, 0.4) is None
    assert "1 -> 1.2" in c.observe(3, 0.4).message
    assert c.temperature == 1.2


def test_a_monitor_step_up_is_a_change_record_naming_before_and_after():
    c = controller(window=1)
    change = c.observe(4, 0.1)
    assert (change.step, change.cause, change.before, change.after) == (4, "monitor", 1.0, 1.2)


def test_a_step_up_at_the_highest_candidate_is_recorded_without_a_change():
    c = controller(temperature=1.4, window=1)
    change = c.observe(2, 0.1)
    assert (change.before, change.after) == (1.4, 1.4)


def test_monitor_resets_when_diversity_recovers():
    c = controller()
    for step, d in enumerate([0.4, 0.4, 0.6, 0.4, 0.4], 1):
        c.observe(step, d)
    assert c.temperature == 1.0


def test_monitor_is_bounded_by_the_highest_candidate():
    c = controller(temperature=1.4)
    for step in range(1, 10):
        c.observe(step, 0.0)
    assert c.temperature == 1.4
    assert any("highest candidate" in e for e in c.events)


def test_monitor_off_when_window_is_zero():
    c = controller(window=0)
    for step in range(1, 10):
        c.observe(step, 0.0)
    assert c.temperature == 1.0


def test_schedule_applies_stages_at_their_steps():
    c = controller(window=0, schedule=[(5, 1.2), (0, 0.8)])
    temps = []
    for s in (0, 1, 5, 6):
        c.start_step(s)
        temps.append(c.temperature)
    assert temps == [0.8, 0.8, 1.2, 1.2]


def test_a_schedule_stage_is_a_change_record():
    c = controller(window=0, schedule=[(2, 0.6)])
    assert c.start_step(1) is None
    change = c.start_step(2)
    assert (change.step, change.cause, change.before, change.after) == (2, "schedule", 1.0, 0.6)


def test_monitor_climbs_from_the_stage_in_force():
    c = controller(window=1, schedule=[(2, 0.6)])
    c.start_step(2)
    c.observe(3, 0.1)
    assert c.temperature == 1.0


def test_a_later_stage_overrides_a_monitor_step_up():
    c = controller(window=1, schedule=[(5, 0.6)])
    c.observe(3, 0.1)
    c.start_step(5)
    assert c.temperature == 0.6


def test_state_round_trips():
    c = controller()
    c.observe(1, 0.1)
    again = controller().resumed(c.state_dict())
    assert again == c
    assert again.observe(2, 0.1) is None and "->" in again.observe(3, 0.1).message


def test_a_resume_keeps_the_saved_temperature_and_count_but_the_configs_window():
    saved = controller(window=3)
    saved.observe(1, 0.1), saved.observe(2, 0.1), saved.observe(3, 0.1), saved.observe(4, 0.1)
    again = controller(window=0).resumed(saved.state_dict())
    assert (again.temperature, again.below, again.window) == (1.2, 1, 0)

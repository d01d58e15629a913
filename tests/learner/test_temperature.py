"""Diversity-determined temperature: calibration, staged schedule, online monitor."""

from __future__ import annotations

import pytest

from microcoder.learner.algorithm.temperature import TemperatureController, calibrate

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


def decaying(steps: int = 100, start: float = 0.9, end: float = 0.1) -> list[float]:
    """A slow, steady fall of diversity, as at a fixed T over a long run (the paper's finding):
    it never recovers, whatever T the monitor sets (the series does not react)."""
    return [start + (end - start) * i / (steps - 1) for i in range(steps)]


def changes_over(c: TemperatureController, series: list[float]) -> list:
    out = [c.observe(step, d) for step, d in enumerate(series, start=1)]
    return [x for x in out if x is not None and x.after != x.before]


def test_the_microcoder_preset_changes_t_at_most_once_over_100_decaying_steps():
    from microcoder.launch.config import load_config
    from microcoder.learner.algorithm.temperature import controller_for

    cfg = load_config(None, ["algorithm.preset=microcoder", "max_steps=100"])
    c = controller_for(cfg.algorithm.temperature, 1.0, cfg.max_steps)
    assert c.window == 10  # a tenth of the run
    changes = changes_over(c, decaying())
    assert len(changes) == 1 and (changes[0].before, changes[0].after) == (1.0, 1.2)
    assert "the monitor's last step-up" in changes[0].message
    assert c.temperature == 1.2


def test_without_a_budget_the_same_series_ramps_t_up_the_ladder():
    """What the budget prevents: the old rule (window 5, no limit) climbs every few steps."""
    c = controller(window=5, candidates=[0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8])
    assert len(changes_over(c, decaying())) == 4 and c.temperature == 1.8


def test_the_auto_window_is_a_tenth_of_the_run_and_at_least_5():
    from microcoder.learner.algorithm.temperature import resolve_window

    assert [resolve_window("auto", n) for n in (16, 40, 59, 100, 500)] == [5, 5, 5, 10, 50]
    assert resolve_window(2, 500) == 2 and resolve_window(0, 500) == 0


def test_a_spent_budget_leaves_the_monitor_watching_only():
    c = controller(window=2, max_changes=1)
    changes_over(c, [0.1, 0.1])
    assert (c.temperature, c.changes) == (1.2, 1)
    assert changes_over(c, [0.1] * 10) == [] and c.temperature == 1.2


def test_a_step_up_at_the_top_of_the_ladder_spends_no_budget():
    c = controller(temperature=1.4, window=2, max_changes=1)
    (top,) = [x for x in (c.observe(s, 0.1) for s in (1, 2)) if x is not None]
    assert top.after == top.before == 1.4 and c.changes == 0


def test_a_resumed_controller_keeps_the_spent_budget():
    c = controller(window=2, max_changes=1)
    changes_over(c, [0.1, 0.1])
    again = controller(window=2, max_changes=1).resumed(c.state_dict())
    assert again.changes == 1 and changes_over(again, [0.1] * 4) == []

"""The diversity-determined temperature inside the live run: calibration on the constructed
diversity curve (tests/live/conftest.py), the table in the launch log, the first steps sampled
at the calibrated temperature, a schedule stage reaching the generators and the step records,
and the online monitor stepping T back up when the groups' diversity stays below the target."""

from __future__ import annotations

from launch_testing.live import HIGH, LOW, STAGE_T, TARGET, generator_temperatures
from launch_testing.waiting import wait_for


def test_calibration_on_the_constructed_curve_picks_the_high_candidate(live):
    (cal,) = live.records("event", event="calibration")
    table = dict(map(tuple, cal["table"]))
    assert table[LOW] < TARGET <= table[HIGH]
    assert (cal["chosen"], cal["reached_target"]) == (HIGH, True)


def test_the_calibration_table_is_in_the_launch_log(live):
    out = live.log.read_text()
    assert "temperature calibration (target diversity 0.800):" in out
    assert f"T={HIGH:<5g} diversity=" in out and "<- chosen" in out


def test_the_first_steps_sample_at_the_calibrated_temperature(live):
    first_two = live.steps()[:2]
    assert [r["step"] for r in first_two] == [1, 2]
    assert [r["temperature"] for r in first_two] == [HIGH, HIGH]
    assert [generator_temperatures(r) for r in first_two] == [[HIGH], [HIGH]]


def test_a_schedule_stage_reaches_the_generators_and_the_step_records(live):
    wait_for(lambda: live.records("step", step=3), 240, "step 3", live.proc)
    (stage,) = live.records("event", event="temperature", cause="schedule", step=2)
    third = live.records("step", step=3)[0]
    assert (stage["step"], stage["before"], stage["temperature"]) == (2, HIGH, STAGE_T)
    assert third["temperature"] == STAGE_T and generator_temperatures(third) == [STAGE_T]


def test_the_monitor_steps_up_after_two_steps_below_the_target(live):
    """At T = 0.001 the groups' diversity (0.3-0.5) stays below 0.8: after monitor_window = 2
    such steps the monitor raises T to the next candidate, 2.0, and the generators follow."""
    (up,) = wait_for(
        lambda: live.records("event", event="temperature", cause="monitor"),
        240,
        "the monitor's step-up",
        live.proc,
    )
    assert (up["before"], up["temperature"]) == (STAGE_T, HIGH) and up["step"] >= 4
    # the change is logged before its step's record: wait for that record too
    wait_for(lambda: live.records("step", step=up["step"]), 240, "the step-up's step", live.proc)
    lows = [r for r in live.steps() if 2 < r["step"] <= up["step"]]
    assert lows[-1]["diversity"] < TARGET and lows[-2]["diversity"] < TARGET
    live.wait_steps(2, "two steps after the step-up")
    after = live.records("step", step=up["step"] + 2)[0]
    assert after["temperature"] == HIGH and generator_temperatures(after) == [HIGH]

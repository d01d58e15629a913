"""The end-of-run summary (launch/monitor/summary.py) on synthetic metrics records: when T changed and
the batch reward compared at equal T."""

from __future__ import annotations

from microcoder.launch.monitor.summary import TrainSummary, summary_table, temperature_spans

SUMMARY = TrainSummary(steps=0, wall_s=1.0)


def steps(rows: list[tuple[int, float, float]]) -> list[dict]:
    return [{"kind": "step", "step": s, "temperature": t, "reward_mean": r} for s, t, r in rows]


def table(history: list[dict]) -> str:
    return summary_table(history, SUMMARY, {})


def test_a_run_at_one_temperature_says_so_and_adds_no_comparison():
    text = table(steps([(s, 1.0, 0.3) for s in range(1, 11)]))
    assert "temperature: 1 throughout" in text and "at equal T" not in text


def test_a_monitor_step_up_is_dated_and_rewards_are_compared_within_each_temperature():
    """The `make run` of the issue: the reward falls across the step-up (first 5 vs last 5
    reads as a failure) while it rises at each temperature."""
    rows = [(s, 1.0, 0.30 + 0.01 * s) for s in range(1, 13)]  # 0.31 .. 0.42
    rows += [(s, 1.2, 0.20 + 0.005 * (s - 12)) for s in range(13, 41)]  # 0.205 .. 0.34
    event = {"kind": "event", "event": "temperature", "cause": "monitor", "step": 12}
    text = table([*steps(rows), event])
    assert "batch reward: first 5 steps 0.330, last 5 steps 0.330" in text
    assert "temperature: 1 at step 1, then 1.2 from step 13 (monitor)" in text
    lines = text.splitlines()
    at_1 = next(ln for ln in lines if ln.strip().startswith("T=1 "))
    at_12 = next(ln for ln in lines if ln.strip().startswith("T=1.2"))
    assert "steps 1-12" in at_1 and "first 5 0.330, last 5 0.400" in at_1
    assert "steps 13-40" in at_12 and "first 5 0.215, last 5 0.330" in at_12


def test_a_temperature_that_comes_back_is_a_new_span():
    rows = [(1, 1.0, 0.1), (2, 0.5, 0.2), (3, 1.0, 0.3)]
    assert [(t, len(s)) for t, s in temperature_spans(steps(rows))] == [
        (1.0, 1),
        (0.5, 1),
        (1.0, 1),
    ]
    text = table(steps(rows))
    assert "then 0.5 from step 2, 1 from step 3" in text and "  T=1     step 3" in text

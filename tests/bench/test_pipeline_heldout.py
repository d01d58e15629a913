"""Unit tests of the held-out half of `microcoder bench pipeline` (no Ray): start and end pass
rates per run, async - sync, eval time kept out of the per-step figures, the table."""

from __future__ import annotations

import argparse

import pytest
from bench_testing import pipeline_result

from microcoder.bench.pipeline import add_arguments, format_table
from microcoder.bench.pipeline.heldout import heldout_headline, heldout_summary
from microcoder.bench.pipeline.real import launch_command, summarize_run


def _step(step, t, reward=0.5):
    return {
        "kind": "step",
        "step": step,
        "time": t,
        "step_s": 2.0,
        "wait_s": 0.5,
        "compute_s": 1.5,
        "responses": 128.0,
        "reward_mean": reward,
        "generator_idle_frac": 0.0,
        "executor_idle_frac": 0.0,
    }


def _eval(step, t, sampled, greedy, seconds=4.0):
    return {
        "kind": "eval",
        "step": step,
        "time": t,
        "heldout_pass_rate": sampled,
        "heldout_greedy_pass_rate": greedy,
        "heldout_pass_rate_wall_s": seconds / 2,
        "heldout_greedy_pass_rate_wall_s": seconds / 2,
    }


def _records(start=(0.30, 0.40), end=(0.50, 0.60), steps=6, end_step=None):
    recs = [_eval(0, 100.0, *start)]
    recs += [_step(i, 100.0 + 2 * i, reward=0.1 * i) for i in range(1, steps + 1)]
    recs.append(_eval(steps if end_step is None else end_step, 130.0, *end))
    return recs


def test_summary_takes_the_first_eval_as_start_and_the_last_as_end():
    recs = _records()
    recs.insert(4, _eval(3, 107.0, 0.9, 0.9))  # a middle eval is neither
    s = heldout_summary(recs)
    assert (s["heldout_start"], s["heldout_end"]) == (0.30, 0.50)


def test_summary_has_greedy_twins_of_start_and_end():
    s = heldout_summary(_records())
    assert (s["heldout_greedy_start"], s["heldout_greedy_end"]) == (0.40, 0.60)


def test_summary_says_at_which_steps_the_evals_were_taken():
    s = heldout_summary(_records(steps=6))
    assert (s["heldout_start_step"], s["heldout_end_step"]) == (0, 6)


def test_a_run_without_evals_has_no_heldout_figures():
    s = heldout_summary([_step(1, 1.0), _step(2, 2.0)])
    assert s["heldout_start"] is None and s["heldout_greedy_end"] is None


def test_end_difference_is_async_minus_sync():
    sync = heldout_summary(_records(end=(0.50, 0.60)))
    fast = heldout_summary(_records(end=(0.45, 0.65)))
    h = heldout_headline(sync, fast)
    assert (h["heldout_end_diff"], h["heldout_greedy_end_diff"]) == pytest.approx((-0.05, 0.05))


def test_gain_difference_compares_end_minus_start_of_each_run():
    sync = heldout_summary(_records(start=(0.30, 0.40), end=(0.50, 0.60)))
    fast = heldout_summary(_records(start=(0.35, 0.40), end=(0.50, 0.60)))
    assert heldout_headline(sync, fast)["heldout_gain_diff"] == pytest.approx(-0.05)


def test_headline_names_start_and_end_of_both_runs():
    h = heldout_headline(heldout_summary(_records()), heldout_summary(_records()))
    keys = {"sync_heldout_start", "sync_heldout_end", "async_heldout_start", "async_heldout_end"}
    keys |= {k.replace("heldout", "heldout_greedy") for k in keys}
    assert keys <= set(h)


def test_runs_evaluated_at_different_steps_are_flagged():
    h = heldout_headline(heldout_summary(_records()), heldout_summary(_records(end_step=5)))
    assert h["heldout_same_steps"] is False


def test_eval_time_inside_the_window_is_not_counted_as_step_time():
    recs = [_step(i, 100.0 + 2 * i) for i in range(1, 4)]
    recs += [_eval(3, 110.0, 0.5, 0.5, seconds=4.0)]  # evaluated after step 3: 4 s
    recs += [_step(4, 112.0)]  # step 4 ended 2 s after that eval
    s = summarize_run(recs, warmup=1)
    assert (s["s_per_step"], s["eval_s_in_window"]) == (pytest.approx(2.0), pytest.approx(4.0))


def test_reward_of_first_and_last_five_steps():
    s = summarize_run([_step(i, 100.0 + 2 * i, reward=float(i)) for i in range(1, 11)], warmup=1)
    assert (s["reward_first5"], s["reward_last5"]) == (3.0, 8.0)


def test_launch_command_sets_eval_every_only_when_given():
    sets = lambda cmd: [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]  # noqa: E731
    with_eval = sets(launch_command("c.toml", "/tmp/r", 30, 2, 0, [], 30))
    without = sets(launch_command("c.toml", "/tmp/r", 30, 2, 0, []))
    assert "eval.every=30" in with_eval and not any(s.startswith("eval.") for s in without)


def _result(warmstart):
    run = summarize_run(_records(), warmup=1)
    fast = summarize_run(_records(end=(0.55, 0.60)), warmup=1)
    real = {
        "config": "configs/tiny-cpu.toml",
        "max_steps": 6,
        "warmup": 1,
        "warmstart": warmstart,
        "runs": {"0": {**run, "command": "launch A"}, "2": {**fast, "command": "launch B"}},
    }
    return pipeline_result(real)


CACHED = {"warmstart": True, "model": "runs/m", "cached": True}


def test_table_shows_start_end_and_gain_of_both_runs():
    lines = format_table(_result(CACHED)).splitlines()
    row = next(ln for ln in lines if ln.startswith("sampled async (k=2)")).split()
    assert row[-3:] == ["0.300", "0.550", "+0.250"]


def test_table_shows_async_minus_sync_at_the_end():
    lines = format_table(_result(CACHED)).splitlines()
    row = next(ln for ln in lines if ln.startswith("sampled async - sync")).split()
    assert row[-2:] == ["+0.050", "+0.050"]


def test_table_says_when_the_first_launch_built_the_warm_start():
    ws = {"warmstart": True, "model": "runs/m", "cached": False, "built_by_first_launch_s": 500.0}
    text = format_table(_result(ws))
    assert "NOT cached, built by the first launch in 500 s" in text


def test_table_says_when_the_warm_start_was_cached():
    assert "runs/m: cached" in format_table(_result(CACHED))


def test_defaults_are_thirty_steps_evaluated_at_start_and_end():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    a = parser.parse_args([])
    assert (a.max_steps, a.eval_every) == (30, 0)

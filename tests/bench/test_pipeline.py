"""Unit tests of `microcoder bench pipeline`: the ideal bound, the run summaries, the tables."""

from __future__ import annotations

import argparse

import pytest
from bench_testing import pipeline_result

from microcoder.bench.pipeline import add_arguments, format_table, headline
from microcoder.bench.pipeline.real import launch_command, summarize_run, window_idle
from microcoder.bench.pipeline.sim import (
    StageCosts,
    bottleneck,
    cpu_figures,
    default_wave,
    ideal_steps_per_s,
    stage_times,
    summarize_point,
)

COSTS = StageCosts(gen_s=0.8, judge_s=0.2, train_s=0.3)


def test_generation_stage_time_divides_by_the_generator_count():
    assert stage_times(COSTS, 4, 1)["generate"] == pytest.approx(0.2)


def test_judge_stage_time_divides_by_the_executor_count():
    assert stage_times(COSTS, 1, 2)["judge"] == pytest.approx(0.1)


def test_ideal_bound_is_one_over_the_slowest_stage():
    assert ideal_steps_per_s({"generate": 0.4, "judge": 0.2, "train": 0.3}) == pytest.approx(2.5)


def test_bottleneck_moves_from_generation_to_training_as_generators_are_added():
    names = [bottleneck(stage_times(COSTS, n, 1)) for n in (1, 2, 4, 8)]
    assert names == ["generate", "generate", "train", "train"]


def test_bound_stops_growing_once_training_is_the_bottleneck():
    bounds = [ideal_steps_per_s(stage_times(COSTS, n, 1)) for n in (4, 8)]
    assert bounds == pytest.approx([1 / 0.3, 1 / 0.3])


def test_a_pool_without_replicas_is_refused():
    with pytest.raises(ValueError, match="at least one generator"):
        stage_times(COSTS, 0, 1)


def test_the_batch_is_shared_by_the_generators_in_waves():
    assert [default_wave(16, n) for n in (1, 2, 3, 8, 32)] == [16, 8, 6, 2, 1]


def _learner_records(ends, wait_s=0.1):
    return [
        {"end": e, "wait_s": wait_s, "groups": 16, "staleness_mean": 1.0, "staleness_max": 1}
        for e in ends
    ]


def test_achieved_rate_counts_only_steps_after_the_warmup():
    records = _learner_records([5.0, 6.0, 6.5, 7.0, 7.5])  # warm-up step took 5 s
    loops = [{"name": "sim-gen-0", "busy_s": 1, "wall_s": 2}]
    times = stage_times(COSTS, 2, 1)
    p = summarize_point(records, loops, {"dropped_stale": 0}, times, 2, 1, warmup=1)
    assert p["achieved_steps_per_s"] == pytest.approx(4 / 2.5)


def test_ratio_is_achieved_over_ideal():
    records = _learner_records([1.0, 2.0, 3.0])
    loops = [{"name": "sim-gen-0", "busy_s": 1, "wall_s": 2}]
    p = summarize_point(records, loops, {}, stage_times(COSTS, 1, 1), 1, 1, warmup=1)
    assert p["ratio"] == pytest.approx(1.0 / 1.25)


def _step(step, t, step_s=2.0, wait_s=0.5, gen_idle=0.0, ex_idle=0.0, responses=128.0):
    return {
        "kind": "step",
        "step": step,
        "time": t,
        "step_s": step_s,
        "wait_s": wait_s,
        "compute_s": step_s - wait_s,
        "sync_s": 0.0,
        "responses": responses,
        "staleness_mean": 1.0,
        "staleness_max": 1.0,
        "generator_idle_frac": gen_idle,
        "executor_idle_frac": ex_idle,
    }


def test_real_summary_measures_steps_after_the_warmup():
    recs = [_step(1, 110.0, step_s=10.0), _step(2, 112.0), _step(3, 114.0), _step(4, 116.0)]
    s = summarize_run(recs, warmup=1)
    assert (s["steps_measured"], s["s_per_step"]) == (3, pytest.approx(2.0))


def test_real_samples_per_second_are_responses_over_the_window():
    recs = [_step(1, 110.0), _step(2, 112.0), _step(3, 114.0)]
    assert summarize_run(recs, warmup=1)["samples_per_s"] == pytest.approx(256 / 4.0)


def test_learner_idle_is_wait_over_step_time():
    recs = [_step(1, 110.0), _step(2, 112.0, wait_s=0.5), _step(3, 114.0, wait_s=1.5)]
    assert summarize_run(recs, warmup=1)["learner_idle_frac"] == pytest.approx(0.5)


def test_window_idle_recovers_the_window_share_from_cumulative_fractions():
    # timers from t0 = 100: idle 10 of the first 10 s, then 3 of the next 10 s
    first = {"time": 110.0, "generator_idle_frac": 1.0}
    last = {"time": 120.0, "generator_idle_frac": 13 / 20}
    assert window_idle(first, last, "generator_idle_frac", 100.0) == pytest.approx(0.3)


def test_a_run_with_no_step_after_the_warmup_is_refused_with_advice():
    with pytest.raises(ValueError, match="raise --max-steps"):
        summarize_run([_step(1, 1.0), _step(2, 2.0)], warmup=2)


def test_launch_command_sets_staleness_steps_and_seed():
    cmd = launch_command("configs/tiny-cpu.toml", "/tmp/r", 10, 0, 3, ["x.y=1"])
    sets = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]
    assert {"max_steps=10", "buffer.max_staleness=0", "seed=3", "x.y=1"} <= set(sets)


def _result():
    run = summarize_run([_step(1, 110.0), _step(2, 112.0), _step(3, 114.0)], warmup=1)
    fast = {**run, "samples_per_s": run["samples_per_s"] * 1.5}
    real = {
        "config": "configs/tiny-cpu.toml",
        "max_steps": 3,
        "warmup": 1,
        "runs": {
            "0": {**run, "command": "python -m microcoder launch A"},
            "2": {**fast, "command": "python -m microcoder launch B"},
        },
    }
    points = [
        summarize_point(
            _learner_records([1.0, 2.0, 3.0]),
            [{"name": "sim-gen-0", "busy_s": 1, "wall_s": 1}],
            {"dropped_stale": 0},
            stage_times(COSTS, n, 1),
            n,
            1,
            1,
        )
        for n in (1, 2)
    ]
    sim = {
        "costs": {"gen_s": 0.8, "judge_s": 0.2, "train_s": 0.3},
        "executors": 1,
        "max_staleness": 2,
        "steps": 2,
        "points": points,
        "ratio": {str(p["generators"]): p["ratio"] for p in points},
    }
    return pipeline_result(real, simulated=sim)


def test_headline_speedup_is_async_over_sync_samples_per_second():
    assert _result()["speedup"] == pytest.approx(1.5)


def test_speedup_at_equal_compute_discounts_a_slower_learner():
    run = summarize_run([_step(1, 110.0), _step(2, 112.0), _step(3, 114.0)], warmup=1)
    # async: 1 s per step, all of it compute; sync: 2 s per step, 1.5 s of it compute
    fast = {**run, "s_per_step": 1.0, "compute_s_mean": 1.0}
    h = headline({"runs": {"0": run, "2": fast}}, 2)
    assert h["speedup_at_equal_compute"] == pytest.approx((2.0 / 1.5) / 1.0)


def test_table_shows_both_runs_side_by_side_with_the_speedup():
    text = format_table(_result())
    assert "sync (k=0)" in text and "async (k=2)" in text and "1.50x" in text


def test_table_has_one_simulated_line_per_generator_count():
    lines = format_table(_result()).splitlines()
    rows = [ln.split() for ln in lines if ln.split()[:1] in (["1"], ["2"])]
    assert [r[0] for r in rows] == ["1", "2"]


def _loops():
    gen = {"busy_s": 1.0, "ticks": 100, "leases": 50, "version_polls": 10}
    return [
        {"name": "sim-gen-0", "wall_s": 10.0, "cpu_s": 0.2, "groups": 100, **gen},
        {"name": "sim-gen-1", "wall_s": 10.0, "cpu_s": 0.4, "groups": 100, **gen},
        {"name": "sim-exec-0", "busy_s": 1.0, "wall_s": 10.0, "cpu_s": 0.1, "groups": 200},
    ]


def test_cpu_figures_are_per_generator_per_group_and_per_wall_second():
    cpu = cpu_figures(_loops(), {"learner": 0.5, "buffer_host": 0.3})
    g1 = cpu["generators"]["sim-gen-1"]
    assert g1["cpu_frac"] == pytest.approx(0.04)
    assert g1["cpu_s_per_group"] == pytest.approx(0.004)
    assert g1["ticks_per_s"] == pytest.approx(10.0)
    assert g1["version_polls_per_s"] == pytest.approx(1.0)
    assert cpu["generator_cpu_s"] == pytest.approx(0.6)
    assert cpu["generator_cpu_s_per_group"] == pytest.approx(0.003)
    assert cpu["generator_cpu_frac_mean"] == pytest.approx(0.03)
    assert cpu["executor_cpu_s"] == {"sim-exec-0": 0.1}
    assert cpu["learner_cpu_s"] == 0.5 and cpu["buffer_host_cpu_s"] == 0.3


def test_table_shows_each_generators_cpu_share():
    result = _result()
    for p in result["simulated"]["points"]:
        p["cpu"] = cpu_figures(_loops(), {})
    text = format_table(result)
    assert "gen CPU" in text and "CPU ms/group" in text
    assert "2 generators, CPU / wall each: 2% 4%" in text


def test_table_of_a_simulated_only_run_has_no_real_section():
    result = {k: v for k, v in _result().items() if k != "real"}
    assert "Real tiny workload" not in format_table(result)


def test_defaults_pick_the_stage_costs_of_the_brief():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    a = parser.parse_args([])
    assert (a.gen_s, a.judge_s, a.train_s, a.generators) == (0.8, 0.2, 0.3, "1,2,4,8")


def test_each_simulated_setting_is_a_keyword_run_point_needs_and_lands_under_it():
    """SIM_POINT names exactly the settings bench/pipeline/sim.py `run_point` requires (so none
    is missing or misnamed when `run` calls it), and its flags parse to `sim_` + the keyword
    (apart from the real part's `--warmup`)."""
    import inspect

    from microcoder.bench.pipeline import SIM_POINT
    from microcoder.bench.pipeline.sim import run_point

    params = inspect.signature(run_point).parameters.values()
    required = {p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
    assert {keyword for _, keyword, _, _ in SIM_POINT} == required
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    a = parser.parse_args([])
    assert (a.sim_batch_size, a.sim_group_size, a.sim_max_staleness) == (16, 8, 2)
    a = parser.parse_args(["--sim-staleness", "3", "--sim-steps", "7", "--sim-warmup", "1"])
    assert (a.sim_max_staleness, a.sim_steps, a.sim_warmup, a.warmup) == (3, 7, 1, 2)

"""`microcoder bench judge` end to end on tiny workloads (no LiveCodeBench: that needs its venv)."""

from __future__ import annotations

import argparse

import pytest

from microcoder.bench import judge as bench
from microcoder.bench.judge import paired
from microcoder.bench.judge import profile as bench_profile
from microcoder.bench.judge.workloads import overhead_workload
from microcoder.sandbox.languages import missing_tools


def _args(*argv: str, **over) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    args = p.parse_args(["--skip-lcb", "--workers", "2", "--workloads", "tricky,overhead", *argv])
    for k, v in over.items():
        setattr(args, k, v)
    return args


def test_paired_rounds_report_median_ratios_with_spread_and_cpu_per_program():
    result = bench.run(_args("--rounds", "3", overhead_solutions=16))
    over, tricky = result["workloads"]["overhead"], result["workloads"]["tricky"]
    assert result["rounds"] == 3 and len(over["runs"]) == 3 and over["solutions"] == 16
    s = over["spread"]["ours_vs_floor"]
    ratios = sorted(r["ours_vs_floor"] for r in over["runs"])
    assert (s["min"], s["median"], s["max"]) == (ratios[0], ratios[1], ratios[2])
    assert s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"]
    assert "speedup_vs_lcb" not in over["spread"]  # LCB did not run
    assert over["ours_cpu_ms_per_solution"] > 0 and over["ours_sandbox_cpu_ms_per_solution"] > 0
    assert len(over["load_before"]) == 3
    assert over["false_verdicts"]["ours"] == 0 and tricky["false_verdicts"]["ours"] == 0
    table = bench.format_table(result)
    assert "3 paired round(s)" in table and "ours/floor wall" in table and "IQR" in table


def test_the_old_repeat_flag_still_sets_the_rounds():
    result = bench.run(_args("--repeat", "2", "--workloads", "tricky"))
    assert result["rounds"] == 2 and len(result["workloads"]["tricky"]["runs"]) == 2


def test_rounds_alternate_the_order_and_the_spread_is_of_the_rounds():
    assert paired.order(0, ["ours", "lcb", "floor"]) == ["ours", "lcb", "floor"]
    assert paired.order(1, ["ours", "lcb", "floor"]) == ["floor", "lcb", "ours"]
    s = paired.spread([10.0, 4.0, 6.0, 8.0, 5.0])
    assert s == {"median": 6.0, "min": 4.0, "max": 10.0, "q1": 5.0, "q3": 8.0}
    assert paired.spread([3.0])["q1"] == paired.spread([3.0])["q3"] == 3.0
    row = paired.summarise([{"ours_vs_floor": 2.0, "x": 1}, {"ours_vs_floor": 4.0, "x": 3}])
    assert row["x"] == 2 and row["spread"]["ours_vs_floor"]["max"] == 4.0


def test_profile_stamps_every_stage_of_every_stdin_run():
    result = bench.run(_args("--profile", "--workloads", "overhead", overhead_solutions=16))
    p = result["profile"]
    truth = sum(it.truth for it in overhead_workload(16))
    assert result["workload"] == "overhead" and p["solutions"] == 16 and p["accepted"] == truth
    assert p["runs"] >= 16 and p["runs_profiled"] == p["runs"]  # every run stamped
    names = [name for name, _, _ in bench_profile.STAGES]
    assert list(p["stages"]) == names
    assert p["stages"]["load"]["runs"] == 16  # once per solution (its first run)
    assert all(s["median_ms"] >= 0 for s in p["stages"].values())
    assert p["child_minflt_mean"] > 0 and p["child_cpu_mean_ms"] > 0
    table = bench.format_table(result)
    assert "child_setup" in table and "run total" in table
    from microcoder.sandbox import grade

    assert grade.PROFILE is None  # switched off again


def test_the_cpp_arm_runs_ours_against_the_floor_with_known_truth():
    if missing_tools(["cpp"]):
        pytest.skip("no g++")
    result = bench.run(_args("--language", "cpp", "--rounds", "1", overhead_solutions=4))
    over = result["workloads"]["overhead"]
    assert result["language"] == "cpp" and list(result["workloads"]) == ["overhead"]
    assert over["solutions"] == 4 and over["false_verdicts"]["ours"] == 0
    assert over["accepted"]["ours"] == over["accepted"]["floor"] == 2
    assert "speedup_vs_lcb" not in over["spread"]


def test_the_overhead_workload_can_have_five_tests_and_ours_agrees_with_its_truth():
    default = overhead_workload(16)
    assert overhead_workload(16, n_tests=3) == default  # the recorded workload is unchanged
    five = overhead_workload(16, n_tests=5)
    assert {len(it.problem.tests) for it in five} == {5}
    assert {len(it.problem.tests) for it in default} == {3}
    with pytest.raises(ValueError, match="at least 1"):
        overhead_workload(4, n_tests=0)
    result = bench.run(
        _args("--workloads", "overhead", "--rounds", "1", overhead_solutions=16, overhead_tests=5)
    )
    over = result["workloads"]["overhead"]
    assert over["tests"] == 16 * 5 and over["false_verdicts"]["ours"] == 0
    assert over["accepted"]["ours"] == sum(it.truth for it in five)

"""`microcoder bench data` (issue 45) without a launch: the generated problem file (valid,
judgeable rows of the requested size, written once and reused) and the peak-RSS bookkeeping
against a child process that holds a known amount of memory, and an executor started on a
file's problem store."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time

from microcoder.bench import data as bench_data
from microcoder.bench.data.launches import FIRST_PROMPT, phase_seconds
from microcoder.bench.data.problems import problems_file
from microcoder.bench.data.rss import PeakSampler, actor_role, pid_role
from microcoder.data.problem import validate_problem


def test_generated_rows_are_valid_and_of_the_requested_size(tmp_path):
    path, reused = problems_file(tmp_path, 300, 4.0, seed=1)
    assert not reused
    lines = path.read_text().splitlines()
    assert len(lines) == 300
    ids = set()
    for i, line in enumerate(lines):
        problem = validate_problem(json.loads(line), str(path), i + 1)
        assert problem.kind == "stdin" and len(problem.tests) == 3 and problem.solutions
        ids.add(problem.id)
        assert abs(len(line) + 1 - 4096) <= 0.1 * 4096  # a row: 4 KB within 10 %
    assert len(ids) == 300
    assert abs(path.stat().st_size / 300 - 4096) <= 0.03 * 4096  # on average within 3 %


def test_the_reference_programs_pass_their_tests(tmp_path, monkeypatch):
    path, _ = problems_file(tmp_path, 3, 2.0)
    for line in path.read_text().splitlines():
        problem = validate_problem(json.loads(line))
        for program in problem.solutions:
            for t in problem.tests:
                out = io.StringIO()
                monkeypatch.setattr(sys, "stdin", io.StringIO(t["input"]))
                with contextlib.redirect_stdout(out):
                    exec(compile(program, "<reference>", "exec"), {"__name__": "__main__"})
                assert out.getvalue() == t["output"], program[-200:]


def test_an_existing_file_is_reused_and_other_sizes_are_not(tmp_path):
    path, _ = problems_file(tmp_path, 50, 1.0)
    mtime = path.stat().st_mtime_ns
    again, reused = problems_file(tmp_path, 50, 1.0)
    assert reused and again == path and path.stat().st_mtime_ns == mtime
    other, reused_other = problems_file(tmp_path, 50, 2.0)
    assert not reused_other and other != path
    assert not list(tmp_path.glob("*.tmp-*"))  # written under a temporary name, then renamed


def test_the_sampler_sees_a_child_holding_a_known_amount():
    hold_mb = 150
    code = (
        "import sys, time\n"
        f"b = bytearray(b'x') * ({hold_mb} * 2**20)\n"  # every page written: resident
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        with PeakSampler({"child": pid_role(child.pid), "none": actor_role("Nobody")}, 0.05) as s:
            time.sleep(0.3)
        assert s.samples >= 2
        assert hold_mb <= s.peaks_mb["child"] <= hold_mb + 60
        assert s.peaks_mb["none"] == 0.0
    finally:
        child.kill()
        child.wait()


def test_actor_roles_match_ray_process_titles():
    executor = actor_role("Executor")
    assert executor(1, ["ray::Executor.run"])
    assert executor(1, ["ray::mc-executor-0:Executor.__init__"])
    assert not executor(1, ["ray::BufferHost"])
    assert not executor(1, ["python", "Executor"])
    assert actor_role("BufferHost")(1, ["ray::BufferHost.get_address"])


def test_the_run_figures_are_read_from_the_logs(tmp_path):
    assert FIRST_PROMPT.search(
        "first prompts handed out: 16 to 'generator-0' (unix time 1796578510.250)"
    )
    t0 = time.mktime(time.strptime("2026-12-06 17:33:00", "%Y-%m-%d %H:%M:%S"))
    (tmp_path / "launcher.log").write_text(
        "[17:34:23] 5492 training prompts (0 skipped as too long), 160 held-out problems\n"
        "[17:34:28] starting 1 executor(s)\n[17:35:16] all pools running\n"
    )
    phases = phase_seconds(tmp_path / "launcher.log", t0)
    assert phases == {"problems_loaded": 83.0, "executors_starting": 88.0, "pools_running": 136.0}


def test_goals_compare_each_file_with_the_baseline():
    base = {"step1_s": 80.0, "peak_mb": {"driver": 500, "buffer": 100, "executor": 120}}
    row = {"step1_s": 150.0, "peak_mb": {"driver": 700, "buffer": 500, "executor": 300}}
    got = bench_data.deltas(row, base)
    assert got["step1_s"] == {"above": 70.0, "limit": 60.0, "met": False}
    assert got["driver"]["met"] and not got["buffer"]["met"] and got["executor"]["met"]
    assert bench_data.deltas({}, base)["driver"]["met"] is None


def test_the_baseline_is_the_mean_of_the_synthetic_launches():
    runs = [
        {"step1_s": 80.0, "peak_mb": {"driver": 500, "executor": 120}},
        {"step1_s": 100.0, "peak_mb": {"driver": 520, "executor": 130}},
    ]
    base = bench_data.mean_baseline(runs)
    assert base["step1_s"] == 90.0 and base["peak_mb"] == {"driver": 510.0, "executor": 125.0}


def test_both_benches_are_registered_and_the_table_names_the_goals():
    from microcoder.launch.cli.cmd_bench import BENCHES

    assert BENCHES["data"] == "microcoder.bench.data"
    assert BENCHES["dedup"] == "microcoder.bench.dedup"
    base = {"source": "synthetic", "problems": None, "step1_s": 70.0, "executor_start_s": 1.0}
    base["peak_mb"] = {"driver": 500, "buffer": 100, "executor": 120}
    row = {"source": "f", "problems": 100_000, "row_kb": 3.9, "file_mb": 380.0, "step1_s": 140.0}
    row["peak_mb"] = {"driver": 600, "buffer": 120, "executor": 700}
    row["above_baseline"] = bench_data.deltas(row, base)
    result = {"launched": True, "baselines": [base], "files": [row], "goals_met": False}
    table = bench_data.format_table(result)
    assert "100,000" in table and "executor 580.0 MB (NOT met)" in table
    assert "step1 70.0 s (NOT met)" in table and "goals met: False" in table


def test_the_executor_start_opens_the_files_store_as_a_launch_does(tmp_path):
    """executor_start builds the file's store once (its own process), then starts an executor
    on it by path in a fresh process, as launch/run/cluster.py does; a second call reuses it."""
    from microcoder.bench.data.launches import executor_start

    path, _ = problems_file(tmp_path, 40, 1.0)
    store = tmp_path / "stores" / path.stem / "problems.sqlite"
    first = executor_start("configs/tiny-cpu.toml", str(path), [], store)
    assert "error" not in first, first
    assert first["problems"] == 40 and first["store_s"] is not None and first["rss_mb"] > 0
    again = executor_start("configs/tiny-cpu.toml", str(path), [], store)
    assert again["problems"] == 40 and again["store_s"] is None  # reused, not rebuilt

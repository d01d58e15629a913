"""The compare grid's runner with a fake launch (unit; the real launches are in
test_compare_launch.py): markers, resume, failures, slots, capacity, the metrics tail."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from microcoder.launch.compare.child import MetricsTail, last_line
from microcoder.launch.compare.runner import (
    DONE_FILE,
    CompareError,
    capacity_error,
    make_job,
    run_jobs,
    slot_envs,
)

CFG = SimpleNamespace(max_steps=3)


def jobs_in(out: Path, arms=("a", "b"), seeds=(0,), sets=()):
    recipe = out / "recipe.toml"
    if not recipe.exists():
        recipe.write_text("max_steps = 3\n")
    return [make_job(recipe, arm, s, list(sets), out, CFG) for s in seeds for arm in arms]


class FakeLaunch:
    """Writes a step record per step and exits with the status given for the arm (default 0)."""

    def __init__(self, rcs=None):
        self.rcs, self.ran, self.envs = rcs or {}, [], []

    def __call__(self, job, env, on_step, on_quiet):
        self.ran.append(job.label)
        self.envs.append(env)
        job.run_dir.mkdir(parents=True, exist_ok=True)
        for step in range(1, job.max_steps + 1):
            on_step(step)
        return self.rcs.get(job.arm, 0)


def run(jobs, launch, resume=False, envs=None):
    return run_jobs(jobs, launch, resume=resume, envs=envs or [{}], say=lambda _: None)


def test_a_finished_run_gets_its_marker(tmp_path):
    jobs = jobs_in(tmp_path)
    run(jobs, FakeLaunch())
    assert all((j.run_dir / DONE_FILE).exists() for j in jobs)


def test_a_failed_run_gets_no_marker_and_the_others_still_run(tmp_path):
    jobs = jobs_in(tmp_path, arms=("a", "b", "c"))
    launch = FakeLaunch({"b": 1})
    results = run(jobs, launch)
    assert [r.status for r in results] == ["finished", "failed", "finished"]
    assert launch.ran == ["a seed0", "b seed0", "c seed0"]
    assert not (jobs[1].run_dir / DONE_FILE).exists()


def test_resume_skips_finished_arm_seeds_and_reruns_the_failed_one(tmp_path):
    jobs = jobs_in(tmp_path)
    run(jobs, FakeLaunch({"b": 1}))
    again = FakeLaunch()
    results = run(jobs, again, resume=True)
    assert again.ran == ["b seed0"]
    assert [r.status for r in results] == ["skipped", "finished"]


def test_resume_moves_the_unfinished_attempt_aside(tmp_path):
    jobs = jobs_in(tmp_path, arms=("a",))
    run(jobs, FakeLaunch({"a": 1}))
    (jobs[0].run_dir / "launch.log").write_text("first attempt\n")
    run(jobs, FakeLaunch(), resume=True)
    moved = tmp_path / "a" / "attempts" / "seed0-1" / "launch.log"
    assert moved.read_text() == "first attempt\n"


def test_without_resume_an_existing_run_dir_is_an_error_before_anything_runs(tmp_path):
    jobs = jobs_in(tmp_path)
    jobs[1].run_dir.mkdir(parents=True)
    launch = FakeLaunch()
    with pytest.raises(CompareError, match="--resume"):
        run(jobs, launch)
    assert launch.ran == []


def test_a_marker_from_other_overrides_is_an_error_on_resume(tmp_path):
    run(jobs_in(tmp_path, arms=("a",)), FakeLaunch())
    changed = jobs_in(tmp_path, arms=("a",), sets=("learner.lr=1e-3",))
    with pytest.raises(CompareError, match="other overrides"):
        run(changed, FakeLaunch(), resume=True)


def test_a_launch_that_raises_is_reported_failed_and_the_grid_goes_on(tmp_path):
    jobs = jobs_in(tmp_path)

    def launch(job, env, on_step, on_quiet):
        if job.arm == "a":
            raise OSError("no such interpreter")
        return 0

    assert [r.status for r in run(jobs, launch)] == ["failed", "finished"]


def test_parallel_slots_run_every_job_each_with_a_slot_environment(tmp_path):
    jobs = jobs_in(tmp_path, arms=("a", "b", "c", "d"))
    launch = FakeLaunch()
    envs = [{"SLOT": "0"}, {"SLOT": "1"}]
    results = run(jobs, launch, envs=envs)
    assert [r.status for r in results] == ["finished"] * 4
    assert {e["SLOT"] for e in launch.envs} <= {"0", "1"}


def test_capacity_error_names_the_parallelism_that_fits():
    assert "--parallel 2" in capacity_error(3, 4.0, 0.0, 8.0, 0)


def test_capacity_fits_when_the_runs_fit():
    assert capacity_error(2, 4.0, 1.0, 8.0, 2) == ""


def test_gpu_slots_get_disjoint_visible_devices():
    envs = slot_envs(2, 2, ["0", "1", "2", "3"])
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1", "2,3"]


def test_metrics_tail_reports_each_new_step_once_and_waits_for_a_partial_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    with path.open("w") as f:
        f.write(json.dumps({"kind": "step", "step": 1}) + "\n")
        f.write(json.dumps({"kind": "eval", "step": 1}) + "\n")
        f.write('{"kind": "step", "st')
    first = tail.new_steps()
    with path.open("a") as f:
        f.write('ep": 2}\n')
    assert (first, tail.new_steps(), tail.new_steps()) == ([1], [2], [])


def test_last_line_of_a_log_is_a_progress_bars_newest_redraw(tmp_path):
    log = tmp_path / "launch.log"
    log.write_text("[13:58:04] run directory: x\nwarm start:  1%| 1/600\rwarm start:  2%| 9/600\r")
    assert last_line(log) == "warm start:  2%| 9/600"
    assert last_line(tmp_path / "missing.log") == ""


def test_last_line_passes_over_what_ray_and_vllm_log_for_the_launchs_own_line(tmp_path):
    log = tmp_path / "launch.log"
    log.write_text(
        "[15:05:21] starting 1 generator(s) (vLLM engine start takes a while)\n"
        "[2026-12-02 15:05:23,336 E 14344 14344] core_worker.cc:2465: Actor mc-generator-0 ...\n"
        "(Generator pid=14344) INFO 12-02 15:05:30 [core.py:93] Initializing a V1 LLM engine\n"
        "INFO 12-02 15:05:31 [loader.py:12] Loading weights took 0.01 seconds\n"
    )
    assert last_line(log) == "[15:05:21] starting 1 generator(s) (vLLM engine start takes a while)"
    log.write_text("[2026-12-02 15:05:23,336 E 14344 14344] core_worker.cc: only library lines\n")
    assert last_line(log).startswith("[2026-12-02")  # nothing of its own yet: the newest


def test_a_launch_quiet_for_a_while_is_reported_with_its_newest_log_line(tmp_path, monkeypatch):
    """The real launch_job loop on a child that logs a line and then no step for longer than
    QUIET_S (as a launch does while its vLLM engine starts)."""
    import sys

    import microcoder.launch.compare.child as cl

    script = "import time; print('[13:55:33] starting 1 generator(s)', flush=True); time.sleep(2)"
    monkeypatch.setattr(cl, "launch_command", lambda job: [sys.executable, "-c", script])
    monkeypatch.setattr(cl, "POLL_S", 0.1)
    monkeypatch.setattr(cl, "QUIET_S", 0.5)
    (job,) = jobs_in(tmp_path, arms=("a",))
    steps, quiet = [], []
    assert cl.launch_job(job, {}, steps.append, quiet.append) == 0
    # reported every QUIET_S while it sleeps (the first may come before its Python printed)
    assert steps == [] and len(quiet) >= 2
    assert quiet[-1] == "[13:55:33] starting 1 generator(s)"


def test_progress_says_how_long_a_quiet_run_has_gone_and_what_its_log_says(tmp_path):
    said = []

    def launch(job, env, on_step, on_quiet):
        on_quiet("[13:55:33] starting 1 generator(s)")
        on_step(1)
        on_quiet("")
        return 0

    (job,) = jobs_in(tmp_path, arms=("a",))
    run_jobs([job], launch, resume=False, envs=[{}], say=said.append)
    assert "a seed0: starting, 00:00 in | [13:55:33] starting 1 generator(s)" in said[1]
    assert said[3].endswith("a seed0: after step 1/3, 00:00 in | (its log is empty)")

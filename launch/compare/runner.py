"""Running the arm × seed grid of `microcoder compare`: the jobs, the finished markers, resume,
concurrency, progress with an ETA.

Each arm-seed is one `microcoder launch RECIPE --run-dir OUT/<arm>/seed<S> --set seed=S ...`
in its own process (launch/compare/child.py), so every run has its own Ray, vLLM engines,
signal handlers and memory, exactly as a user's launch has, and a crash ends that run only.
A run that exits 0 gets OUT/<arm>/seed<S>/COMPARE_DONE.json (what it ran, its wall time);
`--resume` skips the arm-seeds whose marker matches what they would run now, and moves any
other attempt aside to OUT/<arm>/attempts/ before running it again.
"""

from __future__ import annotations

import hashlib
import json
import queue
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from microcoder.evaluation.progress import format_eta
from microcoder.launch.compare.metrics import stop_message
from microcoder.launch.monitor.metrics_log import read_metrics

DONE_FILE = "COMPARE_DONE.json"
"""Written into a run directory only after its launch exited 0."""
LOG_FILE = "launch.log"
"""The launch's stdout and stderr, in its run directory."""
COUNTED = ("finished", "skipped")
"""Statuses of the runs whose curves and finals count in the report."""


class CompareError(RuntimeError):
    """The grid cannot run as asked (the message says what to change)."""


@dataclass(frozen=True)
class Job:
    """One arm-seed: the launch that trains it."""

    arm: str
    seed: int
    run_dir: Path
    """OUT/<arm>/seed<S>."""
    argv: list[str]
    """The `microcoder` arguments: launch RECIPE --run-dir DIR --set ..."""
    fingerprint: str
    """sha256 of the recipe's text and the overrides: what a finished marker must match."""
    max_steps: int

    @property
    def label(self) -> str:
        return f"{self.arm} seed{self.seed}"


@dataclass
class JobResult:
    """How one arm-seed went."""

    arm: str
    seed: int
    status: str
    """finished (ran now, exit 0), skipped (finished before, --resume), failed."""
    rc: int | None
    wall_s: float
    log: str
    """Path of its launch.log."""


RunOne = Callable[[Job, dict[str, str], Callable[[int], None], Callable[[str], None]], int]
"""Runs a job with extra environment variables, calling back with each step it logs and, while
it logs none for a while, with the newest line of its log; returns the exit status. The real one
is compare_launch.launch_job."""


def make_job(recipe: Path, arm: str, seed: int, overrides: list[str], out: Path, cfg) -> Job:
    """The Job of one arm-seed (`overrides`: the arm's, then the command's --set; `cfg`: the
    config they resolve to)."""
    run_dir = out / arm / f"seed{seed}"
    sets = [f"seed={seed}", *overrides]
    argv = ["launch", str(recipe), "--run-dir", str(run_dir)]
    for s in sets:
        argv += ["--set", s]
    digest = hashlib.sha256(recipe.read_bytes() + json.dumps(sets).encode()).hexdigest()
    return Job(arm, seed, run_dir, argv, digest, cfg.max_steps)


def marker(job: Job) -> dict | None:
    path = job.run_dir / DONE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def check_out_dir(jobs: list[Job], resume: bool) -> None:
    """Before anything runs: an existing attempt needs --resume; a finished one must match."""
    for job in jobs:
        done = marker(job)
        if done is not None and done.get("fingerprint") != job.fingerprint:
            raise CompareError(
                f"{job.run_dir} finished with another recipe or other overrides than this "
                "compare would run; use another --out, or delete that folder to run it again"
            )
        if not resume and job.run_dir.exists():
            raise CompareError(
                f"{job.run_dir} exists already: pass --resume to keep finished arm-seeds and "
                "rerun the others, or choose another --out"
            )


def move_aside(job: Job) -> Path:
    """An unfinished attempt's folder goes to OUT/<arm>/attempts/seed<S>-<k> (kept for its logs)."""
    attempts = job.run_dir.parent / "attempts"
    attempts.mkdir(parents=True, exist_ok=True)
    k = 1
    while (attempts / f"seed{job.seed}-{k}").exists():
        k += 1
    target = attempts / f"seed{job.seed}-{k}"
    shutil.move(str(job.run_dir), str(target))
    return target


def stopped_because(run_dir: Path) -> str:
    """Why a launch stopped early, in its own words from its metrics.jsonl ("" when unsaid)."""
    path = run_dir / "metrics.jsonl"
    return stop_message(read_metrics(path)) if path.exists() else ""


def runs_that_fit(cpus_each: float, gpus_each: float, cpus: float, gpus: int) -> int:
    """How many runs of that plan fit this machine side by side (at least 1: one run alone
    time-shares the cores as a launch by hand does)."""
    fit = int(cpus // cpus_each) if cpus_each else 1 << 30
    if gpus_each:
        fit = min(fit, int(gpus // gpus_each))
    return max(fit, 1)


def capacity_error(parallel: int, cpus_each: float, gpus_each: float, cpus: float, gpus: int):
    """Why `parallel` runs do not fit this machine ("" when they do)."""
    if parallel == 1:
        return ""
    fit = runs_that_fit(cpus_each, gpus_each, cpus, gpus)
    if parallel * cpus_each > cpus:
        return (
            f"--parallel {parallel}: each run plans {cpus_each:g} CPUs and this machine has "
            f"{cpus:g}; set --parallel {fit} (or lower the recipe's pools)"
        )
    if gpus_each and parallel * gpus_each > gpus:
        return (
            f"--parallel {parallel}: each run needs {gpus_each:g} GPUs and this machine has "
            f"{gpus}; set --parallel {fit}"
        )
    return ""


def slot_envs(parallel: int, gpus_each: int, visible: list[str]) -> list[dict[str, str]]:
    """Environment per concurrent slot: disjoint CUDA_VISIBLE_DEVICES when runs use GPUs."""
    if parallel <= 1 or not gpus_each:
        return [{} for _ in range(max(parallel, 1))]
    return [
        {"CUDA_VISIBLE_DEVICES": ",".join(visible[k * gpus_each : (k + 1) * gpus_each])}
        for k in range(parallel)
    ]


@dataclass
class Progress:
    """Progress lines on stderr: which arm-seed, its step, the run's and the grid's ETA."""

    total: int
    parallel: int
    say: Callable[[str], None]
    walls: list[float] = field(default_factory=list)
    """Wall seconds of the runs finished in this invocation (the grid's ETA)."""
    started: dict[str, float] = field(default_factory=dict)
    first_step: dict[str, tuple[int, float]] = field(default_factory=dict)
    latest: dict[str, int] = field(default_factory=dict)
    """Each running job's newest step."""
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, job: Job) -> None:
        with self.lock:
            self.started[job.label] = time.time()
            self.say(
                f"compare: [{self.done + 1}/{self.total}] {job.label}: starting ({job.run_dir})"
            )

    def step(self, job: Job, step: int) -> None:
        with self.lock:
            now = time.time()
            first = self.first_step.setdefault(job.label, (step, now))
            self.latest[job.label] = step
            left = max(job.max_steps - step, 0)
            run_eta = None
            if step > first[0]:
                run_eta = (now - first[1]) / (step - first[0]) * left
            elapsed = now - self.started.get(job.label, now)
            per_run = sum(self.walls) / len(self.walls) if self.walls else None
            if per_run is None and run_eta is not None:
                per_run = elapsed + run_eta
            waiting = self.total - self.done - 1
            grid = None
            if per_run is not None and run_eta is not None:
                grid = run_eta + per_run * waiting / max(self.parallel, 1)
            self.say(
                f"compare: [{self.done + 1}/{self.total}] {job.label}: step {step}/{job.max_steps}"
                f" | run ETA {format_eta(run_eta)} | all ETA {format_eta(grid)}"
            )

    def quiet(self, job: Job, line: str) -> None:
        """No step for a while: how long it has run, and what its log says now."""
        with self.lock:
            elapsed = time.time() - self.started.get(job.label, time.time())
            step = self.latest.get(job.label)
            where = "starting" if step is None else f"after step {step}/{job.max_steps}"
            self.say(
                f"compare: [{self.done + 1}/{self.total}] {job.label}: {where}, "
                f"{format_eta(elapsed)} in | {line or '(its log is empty)'}"
            )

    def end(self, job: Job, result: JobResult) -> None:
        with self.lock:
            self.done += 1
            if result.status == "finished":
                self.walls.append(result.wall_s)
            why = ""
            if result.status == "failed":
                said = stopped_because(job.run_dir)
                why = f" (exit {result.rc}{': ' + said if said else ''}; log {result.log})"
            took = f"in {format_eta(result.wall_s)}"
            if result.status == "skipped":
                took = f"(--resume: finished earlier {took})"
            self.say(
                f"compare: [{self.done}/{self.total}] {job.label}: {result.status} {took}{why}"
            )


def run_jobs(
    jobs: list[Job],
    run_one: RunOne,
    *,
    resume: bool,
    envs: list[dict[str, str]],
    say: Callable[[str], None],
    on_interrupt: Callable[[], None] = lambda: None,
) -> list[JobResult]:
    """Every job, `len(envs)` at a time; finished ones skipped under `resume`. One job's
    failure does not stop the others; results come back in the jobs' order. When the grid
    itself is interrupted, `on_interrupt` stops the running jobs before it re-raises."""
    check_out_dir(jobs, resume)
    progress = Progress(len(jobs), len(envs), say)
    slots: queue.Queue[int] = queue.Queue()
    for k in range(len(envs)):
        slots.put(k)

    def one(job: Job) -> JobResult:
        log = str(job.run_dir / LOG_FILE)
        done = marker(job)
        if done is not None:
            result = JobResult(job.arm, job.seed, "skipped", 0, done.get("wall_s", 0.0), log)
            progress.end(job, result)
            return result
        if job.run_dir.exists():
            say(f"compare: {job.label}: an unfinished attempt moved to {move_aside(job)}")
        slot = slots.get()
        try:
            progress.start(job)
            job.run_dir.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            try:
                rc = run_one(
                    job,
                    envs[slot],
                    lambda step: progress.step(job, step),
                    lambda line: progress.quiet(job, line),
                )
            except Exception as err:  # the launcher could not even start: report, go on
                why = f"could not run: {type(err).__name__}: {err}"
                say(f"compare: {job.label}: {why}")
                with (job.run_dir / LOG_FILE).open("a") as f:
                    f.write(f"compare: {why}\n")
                rc = None
            wall = time.time() - t0
        finally:
            slots.put(slot)
        status = "finished" if rc == 0 else "failed"
        if rc == 0:
            info = {"fingerprint": job.fingerprint, "argv": job.argv, "wall_s": wall}
            info["finished"] = time.time()
            (job.run_dir / DONE_FILE).write_text(json.dumps(info, indent=1) + "\n")
        result = JobResult(job.arm, job.seed, status, rc, wall, log)
        progress.end(job, result)
        return result

    if len(envs) == 1:
        return [one(job) for job in jobs]
    pool = ThreadPoolExecutor(max_workers=len(envs))
    try:
        futures = [pool.submit(one, job) for job in jobs]
        return [f.result() for f in futures]
    except BaseException:
        on_interrupt()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

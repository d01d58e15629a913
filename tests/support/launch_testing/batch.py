"""Single-launch modules of the slow tier whose launches run at once.

Each of these modules checks one `microcoder launch` of the tiny model that no other test
touches (MODULES). A tiny launch waits more than it computes (process and Ray starts, imports,
the vLLM engine, polls): one alone keeps about half a core busy, so several side by side take
little longer than the slowest (tests/launch/test_launch_families.py runs its three the same
way). A module declares its launch at import:

    finished_run = batched_launch(__file__, "real-data", args)  # args(run_dir, model_dir)

and its tests take `finished_run`: (the process's result, as `subprocess.run(...,
capture_output=True, text=True)` returns it, and the run directory), as `finished_launch`'s
fixture gives. The first of these modules that a session runs starts the launches of every one
of them the session selected, in the session's order, at most AT_ONCE at a time (the next starts
when one ends, checked while a module waits), all from the test's main thread (the children die
with it: launched.py). tests/conftest.py's `unit_of` makes MODULES one unit of work under
xdist, so one worker owns the batch; a module run alone (`pytest tests/launch/test_X.py`)
launches only its own run."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from launch_testing.launched import LaunchedProcess, launch_cmd

MODULES = (
    "tests/launch/test_launch_answer.py",
    "tests/launch/test_launch_mixture.py",
    "tests/launch/test_launch_real_data.py",
    "tests/launch/test_launch_relay.py",
    "tests/learner/test_lora_launch.py",
)
"""The batched modules, by path from the repository root (each calls `batched_launch`)."""
UNIT = "launch-batch"
"""Their unit of work under xdist (tests/conftest.py `unit_of`)."""
AT_ONCE = 3
"""Launches of the batch running at one time (memory: ~2-3 GiB each)."""
TIMEOUT_S = 840.0
"""How long a module waits for its launch from the moment it asks (under its test's deadline)."""

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Declared:
    module: str  # path from the repository root, as in MODULES
    name: str
    args: Callable[[Path, Path], list[str]]  # (run_dir, tiny model dir) -> launch arguments


@dataclass
class Job:
    declared: Declared
    root: Path
    model_dir: Path
    run: LaunchedProcess | None = None

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    def start(self) -> None:
        out, err = self.root / "stdout", self.root / "stderr"
        with err.open("w") as err_file:
            cmd = launch_cmd(self.declared.args(self.run_dir, self.model_dir))
            self.run = LaunchedProcess(cmd, log=out, stderr=err_file, cwd=REPO)

    def done(self) -> bool:
        return self.run is not None and self.run.poll() is not None

    def result(self) -> subprocess.CompletedProcess:
        out, err = (self.root / "stdout").read_text(), (self.root / "stderr").read_text()
        return subprocess.CompletedProcess(self.run.cmd, self.run.returncode, out, err)


@dataclass
class Batch:
    jobs: dict[str, Job]  # in the order they start
    started: list[str] = field(default_factory=list)

    def _start_more(self) -> None:
        running = sum(1 for n in self.started if not self.jobs[n].done())
        for name, job in self.jobs.items():
            if running >= AT_ONCE:
                return
            if job.run is None:
                job.start()
                self.started.append(name)
                running += 1

    def wait(self, name: str, timeout_s: float = TIMEOUT_S) -> Job:
        """`name`'s launch to its end (started now if the batch had not reached it), starting
        the next ones as others end; on the deadline its group is stopped and the test fails."""
        job = self.jobs[name]
        if job.run is None:
            job.start()
            self.started.append(name)
        deadline = time.monotonic() + timeout_s
        while not job.done():
            self._start_more()
            if time.monotonic() > deadline:
                job.run.stop()
                raise AssertionError(
                    f"the {name} launch did not end within {timeout_s:.0f} s; its output ends:\n"
                    + (job.root / "stdout").read_text()[-3000:]
                )
            time.sleep(1)
        self._start_more()
        return job

    def stop(self) -> None:
        for job in self.jobs.values():
            if job.run is not None:
                job.run.stop()


DECLARED: dict[str, Declared] = {}


def module_path(file: str) -> str:
    return Path(file).resolve().relative_to(REPO).as_posix()


def batched_launch(file: str, name: str, args: Callable[[Path, Path], list[str]]):
    """Declare the launch of the module at `file` (pass `__file__`); returns its module-scoped
    fixture `finished_run`: (result, run_dir) once the launch has ended."""
    module = module_path(file)
    assert module in MODULES, f"{module}: add it to launch_testing.batch.MODULES"
    DECLARED[name] = Declared(module, name, args)

    @pytest.fixture(scope="module")
    def finished_run(launch_batch):
        job = launch_batch.wait(name)
        return job.result(), job.run_dir

    return finished_run


def make_batch(items: list[pytest.Item], base: Path, model_dir: Path) -> Batch:
    """The declared launches of the modules that `items` (the session's selected tests) hold,
    in the order of their first test, on the tiny model at `model_dir`."""
    order: dict[str, int] = {}
    for k, item in enumerate(items):
        order.setdefault(item.nodeid.split("::")[0], k)
    chosen = [d for d in DECLARED.values() if d.module in order]
    chosen.sort(key=lambda d: order[d.module])
    jobs = {}
    for d in chosen:
        root = base / d.name
        root.mkdir(parents=True)
        jobs[d.name] = Job(d, root, model_dir)
    return Batch(jobs)

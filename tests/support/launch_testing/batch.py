"""The slow tier's launch modules whose launches run side by side.

Each of these modules (MODULES) checks launched runs that no other test touches: the learning
check's two arms, the compare (its two arms one after the other), and one launch each of the
answer, mixture, real-data, relay and LoRA modules. A tiny launch waits more than it computes
(process and Ray starts, imports, the vLLM engine, polls), so several side by side take little
longer than the slowest (tests/launch/test_launch_families.py runs its three the same way). A
module declares its commands at import:

    finished_run = batched_launch(__file__, "real-data", args)  # args(run_dir, model_dir)

and its tests take `finished_run`: (the process's result, as `subprocess.run(...,
capture_output=True, text=True)` returns it, and the run directory). A module with several
commands declares each (`declare`) and waits for them in a fixture of its own
(`launch_batch.wait(name)`).

The first of these modules that a session runs makes the batch (tests/conftest.py
`launch_batch`): the commands of every one of them the session selected. It starts those on the
random-weight tiny model at once (at most AT_ONCE). The first module waiting for a command on
the warm-started model (`warm_model_dir`, shared with the other worker) builds that model
meanwhile. Every later start happens while a module waits for its own command, in MODULES
order as slots free (the learning arms first: the longest), and a module whose command has not
started yet starts it at once. Every child is
started from the test's main thread and dies with it (launched.py). tests/conftest.py's
`unit_of` makes MODULES one unit of work under xdist, so one worker owns the batch; a module run
alone (`pytest tests/launch/test_X.py`) runs only its own commands."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from launch_testing.launched import LaunchedProcess

MODULES = (
    "tests/launch/test_learning.py",
    "tests/launch/test_compare_launch.py",
    "tests/launch/test_launch_relay.py",
    "tests/launch/test_launch_mixture.py",
    "tests/launch/test_launch_real_data.py",
    "tests/learner/test_lora_launch.py",
    "tests/launch/test_launch_answer.py",
    "tests/launch/test_launch_repair.py",
    "tests/launch/test_launch_user_env.py",
)
"""The batched modules, by path from the repository root, in the order their commands start."""
UNIT = "launch-batch"
"""Their unit of work under xdist (tests/conftest.py `unit_of`)."""
AT_ONCE = 3
"""Commands of the batch running at one time: the learning arms and one more once the warm start
is built (a learning arm holds ~4 GiB, docs/testing.md "Learning checks"; a small launch ~1.5)."""
STAGGER_S = 40.0
"""At most one command starts every STAGGER_S seconds: local Ray instances booting at once on two
loaded cores have missed Ray's fixed 30 s wait for the raylet to register ("The current node
timed out during startup": the answer launch in the CI rehearsal of 2026-12-07, three launches
started together while the other worker ran its own)."""
TIMEOUT_S = 840.0
"""How long a module waits for a command from the moment it asks, unless it declared longer."""

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Declared:
    module: str  # path from the repository root, as in MODULES
    name: str
    args: Callable[[Path, Path], list[str]]  # (run_dir, model dir) -> the command's arguments
    command: str  # the `microcoder` subcommand ("launch", "compare"); "": args is the argv
    model: str  # the model's session fixture: "tiny_model_dir" or "warm_model_dir"
    timeout_s: float
    env: dict[str, str] | None = None  # the child's environment (None: this process's)


@dataclass
class Job:
    declared: Declared
    root: Path
    model_dir: Path | None = None  # None until the model's fixture is resolved
    run: LaunchedProcess | None = None

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    def start(self) -> None:
        out, err = self.root / "stdout", self.root / "stderr"
        with err.open("w") as err_file:
            cmd = self.declared.args(self.run_dir, self.model_dir)
            if self.declared.command:
                cmd = [sys.executable, "-m", "microcoder", self.declared.command, *cmd]
            env = {} if self.declared.env is None else {"env": self.declared.env}
            self.run = LaunchedProcess(cmd, log=out, stderr=err_file, cwd=REPO, **env)

    def done(self) -> bool:
        return self.run is not None and self.run.poll() is not None

    def result(self) -> subprocess.CompletedProcess:
        out, err = (self.root / "stdout").read_text(), (self.root / "stderr").read_text()
        return subprocess.CompletedProcess(self.run.cmd, self.run.returncode, out, err)


class Batch:
    def __init__(self, jobs: dict[str, Job]):
        self.jobs = jobs  # in MODULES order
        self.last_start = -float("inf")

    def start_more(self) -> None:
        """Start waiting commands whose model is ready, in order, while fewer than AT_ONCE run
        and STAGGER_S have passed since the last start."""
        running = sum(1 for j in self.jobs.values() if j.run is not None and not j.done())
        for job in self.jobs.values():
            if running >= AT_ONCE:
                return
            if job.run is None and job.model_dir is not None:
                if time.monotonic() - self.last_start < STAGGER_S:
                    return
                self.start(job)
                running += 1

    def start(self, job: Job) -> None:
        job.start()
        self.last_start = time.monotonic()

    def resolve(self, fixture: Callable[[str], Path], model: str) -> None:
        """Give the commands on the session fixture `model` its folder (built on first use)."""
        waiting = [j for j in self.jobs.values() if j.declared.model == model]
        if waiting:
            folder = Path(fixture(model))
            for job in waiting:
                job.model_dir = folder

    def wait(self, name: str, fixture: Callable[[str], Path]) -> Job:
        """`name`'s command to its end (started now if the batch had not reached it), starting
        the next ones as others end; past its deadline its group is stopped and the test fails.
        `fixture(name)` gives a session fixture's value: the command's model folder, built here
        when no module asked for it before (the warm start, while the started commands run)."""
        job = self.jobs[name]
        if job.model_dir is None:
            self.resolve(fixture, job.declared.model)
        self.start_more()  # the commands before it first (the learning arms: the longest)
        if job.run is None:
            time.sleep(max(0.0, self.last_start + STAGGER_S - time.monotonic()))
            self.start(job)
        deadline = time.monotonic() + job.declared.timeout_s
        while not job.done():
            self.start_more()
            if time.monotonic() > deadline:
                job.run.stop()
                raise AssertionError(
                    f"{name} did not end within {job.declared.timeout_s:.0f} s; its output "
                    "ends:\n" + (job.root / "stdout").read_text()[-3000:]
                )
            time.sleep(1)
        self.start_more()
        return job

    def stop(self, *names: str) -> None:
        """Stop the commands `names` (every one when none is named); harmless when ended."""
        for name, job in self.jobs.items():
            if job.run is not None and (not names or name in names):
                job.run.stop()


DECLARED: dict[str, Declared] = {}


def declare(
    file: str,
    name: str,
    args: Callable[[Path, Path], list[str]],
    command: str = "launch",
    model: str = "tiny_model_dir",
    timeout_s: float = TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> None:
    """Declare a command of the module at `file` (pass `__file__`): `microcoder COMMAND
    ARGS(run_dir, model dir)`, the model dir being the session fixture `model`'s folder; `env`
    the child's environment (e.g. a PYTHONPATH for a user module), None: this process's."""
    module = Path(file).resolve().relative_to(REPO).as_posix()
    assert module in MODULES, f"{module}: add it to launch_testing.batch.MODULES"
    DECLARED[name] = Declared(module, name, args, command, model, timeout_s, env)


def batched_launch(file: str, name: str, args: Callable[[Path, Path], list[str]], **kw):
    """`declare` the module's one command; returns its module-scoped fixture `finished_run`:
    (result, run_dir) once the command has ended."""
    declare(file, name, args, **kw)

    @pytest.fixture(scope="module")
    def finished_run(launch_batch, request):
        job = launch_batch.wait(name, request.getfixturevalue)
        return job.result(), job.run_dir

    return finished_run


def make_batch(items: list[pytest.Item], base: Path, tiny_model_dir: Path) -> Batch:
    """The batch of the declared commands of the modules that `items` (the session's selected
    tests) hold, those on the tiny model at `tiny_model_dir` started."""
    selected = {item.nodeid.split("::")[0] for item in items}
    chosen = [d for d in DECLARED.values() if d.module in selected]
    chosen.sort(key=lambda d: MODULES.index(d.module))  # stable: a module's own order kept
    jobs = {}
    for d in chosen:
        root = base / d.name
        root.mkdir(parents=True)
        jobs[d.name] = Job(d, root)
    batch = Batch(jobs)
    batch.resolve(lambda name: tiny_model_dir, "tiny_model_dir")
    batch.start_more()
    return batch

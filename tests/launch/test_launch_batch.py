"""The launch batch (tests/support/launch_testing/batch.py) runs its commands side by side, never
more than AT_ONCE at a time, starts them in MODULES order as slots free, starts a command a
module asks for at once, hands each module its own result, and stops a command past its
deadline naming it. Small Python processes stand in for the launches."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from launch_testing import batch

REPO = Path(__file__).parents[2]

STAND_IN = """
import pathlib, sys, time
run = pathlib.Path(sys.argv[1]); run.mkdir(parents=True)
time.sleep(float(sys.argv[2]))
print("out of", run.parent.name); print("err of", run.parent.name, file=sys.stderr)
sys.exit(int(sys.argv[3]))
"""


def stand_in(seconds: float, code: int = 0):
    return lambda run_dir, model_dir: [
        sys.executable,
        "-c",
        STAND_IN,
        str(run_dir),
        str(seconds),
        str(code),
    ]


@pytest.fixture
def declared(monkeypatch):
    """Five stand-ins declared by the first five MODULES (one each), as `declare` would, the
    last module's first (import order is no start order)."""
    table = {}
    for k, module in reversed(list(enumerate(batch.MODULES[:5]))):
        name = f"job{k}"
        table[name] = batch.Declared(module, name, stand_in(1.5), "", "tiny_model_dir", 60)
    monkeypatch.setattr(batch, "DECLARED", table)
    monkeypatch.setattr(batch, "STAGGER_S", 0.0)
    return table


def items(*modules: str) -> list:
    return [SimpleNamespace(nodeid=f"{m}::test_x") for m in modules]


def test_every_module_of_the_batch_exists():
    assert len(set(batch.MODULES)) == len(batch.MODULES)
    for module in batch.MODULES:
        assert (REPO / module).is_file(), module


def test_at_most_at_once_run_and_they_start_in_modules_order(declared, tmp_path, monkeypatch):
    starts, started = [], []  # (name, how many others ran at that moment), the jobs started
    real_start = batch.Job.start

    def start(job):
        running = sum(1 for j in started if j.run.poll() is None)
        starts.append((job.declared.name, running))
        real_start(job)
        started.append(job)

    monkeypatch.setattr(batch.Job, "start", start)
    # the session's order is the reverse of MODULES': the batch still starts in MODULES order
    got = batch.make_batch(items(*reversed(batch.MODULES[:5])), tmp_path, tmp_path)
    assert [name for name, _ in starts] == [f"job{k}" for k in range(batch.AT_ONCE)]
    last = got.wait("job4", lambda name: tmp_path)  # asked for first: it starts at once
    assert last.result().returncode == 0
    for name in declared:
        assert got.wait(name, lambda name: tmp_path).result().returncode == 0
    assert [name for name, _ in starts] == ["job0", "job1", "job2", "job4", "job3"]
    assert dict(starts)["job4"] == batch.AT_ONCE  # beside the first AT_ONCE
    for name, running in starts:  # the batch started every other one only below AT_ONCE
        if name != "job4":
            assert running < batch.AT_ONCE, starts


def test_each_module_gets_its_own_output_and_exit_code(declared, tmp_path):
    declared["job1"].args = stand_in(0.1, code=3)
    got = batch.make_batch(items(*batch.MODULES[:2]), tmp_path, tmp_path)
    assert list(got.jobs) == ["job0", "job1"]  # only the selected modules' commands
    for name, code in (("job0", 0), ("job1", 3)):
        res = got.wait(name, lambda name: tmp_path).result()
        assert res.returncode == code
        assert res.stdout == f"out of {name}\n" and res.stderr == f"err of {name}\n"


def test_a_command_past_its_deadline_is_stopped_and_named(declared, tmp_path):
    declared["job0"].args = stand_in(60)
    declared["job0"].timeout_s = 2
    got = batch.make_batch(items(batch.MODULES[0]), tmp_path, tmp_path)
    with pytest.raises(AssertionError, match="job0 did not end within 2 s"):
        got.wait("job0", lambda name: tmp_path)
    assert got.jobs["job0"].run.poll() is not None  # its process group was stopped


def test_starts_are_staggered(declared, tmp_path, monkeypatch):
    """No two commands start within STAGGER_S of each other (local Ray instances booting at once
    on loaded cores miss Ray's raylet deadline), the one a module asks for included."""
    monkeypatch.setattr(batch, "STAGGER_S", 0.6)
    times = []
    real_start = batch.Job.start

    def start(job):
        times.append(time.monotonic())
        real_start(job)

    monkeypatch.setattr(batch.Job, "start", start)
    got = batch.make_batch(items(*batch.MODULES[:5]), tmp_path, tmp_path)
    assert len(times) == 1  # one at once, the others as the stagger passes
    for name in reversed(list(declared)):  # job4 first: asked for, it still waits its turn
        assert got.wait(name, lambda name: tmp_path).result().returncode == 0
    assert len(times) == 5
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= 0.6

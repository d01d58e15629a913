"""The launch batch (tests/support/launch_testing/batch.py) runs its commands side by side, never
more than AT_ONCE at a time, starts them in MODULES order as slots free, starts a command a
module asks for at once, hands each module its own result, and stops a command past its
deadline naming it. Small Python processes stand in for the launches."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from launch_testing import batch

REPO = Path(__file__).parents[2]

STAND_IN = """
import pathlib, sys, time
run = pathlib.Path(sys.argv[1]); run.mkdir(parents=True)
(run / "started").write_text(repr(time.monotonic()))
time.sleep(float(sys.argv[2]))
print("out of", run.parent.name); print("err of", run.parent.name, file=sys.stderr)
(run / "ended").write_text(repr(time.monotonic()))
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


def times(job: batch.Job) -> tuple[float, float]:
    return tuple(float((job.run_dir / f).read_text()) for f in ("started", "ended"))


@pytest.fixture
def declared(monkeypatch):
    """Five stand-ins declared by the first five MODULES (one each), as `declare` would."""
    table = {}
    for k, module in enumerate(batch.MODULES[:5]):
        name = f"job{k}"
        table[name] = batch.Declared(module, name, stand_in(1.5), "", "tiny_model_dir", 60)
    monkeypatch.setattr(batch, "DECLARED", table)
    return table


def items(*modules: str) -> list:
    return [SimpleNamespace(nodeid=f"{m}::test_x") for m in modules]


def test_every_module_of_the_batch_exists():
    assert len(set(batch.MODULES)) == len(batch.MODULES)
    for module in batch.MODULES:
        assert (REPO / module).is_file(), module


def test_at_most_at_once_run_and_they_start_in_modules_order(declared, tmp_path):
    # the session's order is the reverse of MODULES': the batch still starts in MODULES order
    got = batch.make_batch(items(*reversed(batch.MODULES[:5])), tmp_path, tmp_path)
    assert [j.run is not None for j in got.jobs.values()] == [True] * batch.AT_ONCE + [False] * (
        5 - batch.AT_ONCE
    )
    last = got.wait("job4", lambda name: tmp_path)
    assert last.result().returncode == 0
    for name in declared:
        got.wait(name, lambda name: tmp_path)
    spans = {name: times(job) for name, job in got.jobs.items()}
    # job4 was asked for first: it started at once, beside the first AT_ONCE ...
    assert spans["job4"][0] < spans["job3"][0]
    # ... and the batch started every other one only while fewer than AT_ONCE ran
    for name in ("job0", "job1", "job2", "job3"):
        start = spans[name][0]
        running = [n for n, (s, e) in spans.items() if n != name and s <= start < e]
        assert len(running) < batch.AT_ONCE, (name, spans)
    assert spans["job3"][0] >= min(spans[n][1] for n in ("job0", "job1", "job2"))


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

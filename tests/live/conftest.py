"""The shared live run: one real `microcoder launch` of the tiny config (buffer, executor, learner,
vLLM generator and dashboard on a local Ray, through the real CLI) that every test in tests/live
observes. It is what `make test` proves of the whole product (docs/testing.md).

The run uses the random-weight tiny model (no warm start, no eval, no filtering: the machinery,
not the learning) and a temperature setting whose outcome is known by construction:

- calibration between 0.001 and 2.0 at target diversity 0.8 must pick 2.0 (at T = 2.0 the random
  model samples nearly uniform tokens, diversity ~1.0; at T = 0.001 its near-tied logits leave
  responses 0.3-0.5 diverse, tests/actors/test_generator.py);
- a schedule stage at step 2 sets T = 0.001;
- the online monitor (window 2) then sees diversity below 0.8 and steps T back up to 2.0.

What a test may do to the run: read its files, ask `status`, open the dashboard, scale a pool and
put it back, kill -9 a generator or an executor (the supervisor restarts it). Tests that end the
run (Ctrl-C, then resume) are marked `ends_live_run`; they run after every other
test of this folder, whatever the file order. Nothing else may stop the run or change its config.

The run is started on first use and stopped when the last test of this folder is done; it dies
with the test process if that is killed first (launch_testing.launched)."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch_testing.launched import start_launch
from launch_testing.live import SETTINGS, LiveRun, set_args
from launch_testing.waiting import wait_for


@pytest.fixture(scope="package")
def live(tiny_model_dir, tmp_path_factory) -> LiveRun:
    run_dir = tmp_path_factory.mktemp("live") / "run"
    log = run_dir.parent / "launch.log"
    args = [
        "configs/tiny-cpu.toml",
        "--run-dir",
        str(run_dir),
        "--set",
        f'model.path="{tiny_model_dir}"',
        *set_args(SETTINGS),
    ]
    with start_launch(args, log=log) as proc:
        run = LiveRun(proc, run_dir, log)
        wait_for(lambda: len(run.steps()) >= 2, 240, "two learner steps of the live run", proc)
        yield run


ORDER = ("test_run.py", "test_temperature.py", "test_dashboard.py", "test_pools.py")
"""The files in the order of the run's life: plain observation first, then the pools'
disturbances (a file not listed goes after these); `ends_live_run` tests always come last."""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Every test here is marked `live` and put in ORDER (file order within a file); those marked
    `ends_live_run` move behind all the others, so no test finds the shared run stopped."""
    here = Path(__file__).parent
    mine = [k for k, item in enumerate(items) if here in item.path.parents]
    tests = [items[k] for k in mine]
    for item in tests:
        item.add_marker("live")

    def rank(item) -> tuple[bool, int]:
        name = item.path.name
        ends = item.get_closest_marker("ends_live_run") is not None
        return ends, ORDER.index(name) if name in ORDER else len(ORDER)

    for k, item in zip(mine, sorted(tests, key=rank), strict=True):
        items[k] = item

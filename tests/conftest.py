"""Shared fixtures: the tiny model is built once per test session (no download, ~4 s), so is its
warm-started twin (~1.5 min, only for the slow tests that need it; once for all xdist workers),
and one local Ray instance serves every test that starts actors. Helpers that tests of several
folders share live in tests/support/ (e.g. `engine_testing`), put on sys.path here.

Under pytest-xdist (`make test` and `make test-all` run two workers), every
test module is one unit of work, so a module's fixtures (a vLLM engine, a launch) are built once;
tests/live is one unit (its run is shared by the whole folder). The units that drive launches or
engines go first, longest deadline first, so the fast tests fill the other worker at the end
(docs/testing.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SUPPORT = str(Path(__file__).with_name("support"))
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A freshly built tiny Qwen2 folder (seed 0), shared by every test of the session."""
    from microcoder.learner.models.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def warm_model_dir(tmp_path_factory):
    """The tiny model after the default warm start, built once per session through the real CLI
    (`microcoder tiny-model --warmstart`, seed 0: the model `make run` trains; ~1.5 min) for the
    tests that need a model that already solves some problems (learning, compare, the warm
    start's window). Its `warmstart.json` holds the warm start's evaluations. Under xdist the
    workers share one build: the first to need it builds it under a file lock in the run's
    common temp folder, the others wait for it and reuse it."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # .../pytest-N/popen-gwK -> .../pytest-N, common to the workers
    folder = shared / "warm" / "tiny-model-warm"
    with FileLock(str(shared / "warm.lock"), timeout=900):
        if not (folder / "warmstart.json").exists():
            cmd = [sys.executable, "-m", "microcoder", "tiny-model", "--warmstart"]
            cmd += ["--out", str(folder), "--no-progress"]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return folder


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray instance for every test of the session that needs real actors (a second
    `ray.init` in the same process fails, so the test packages share this one). A new instance
    on loopback, as a local run gets (launch/run/cluster.py: init_local_ray): it never attaches to a
    cluster that `ray start` recorded on the machine."""
    import ray

    from microcoder.launch.run.cluster import init_local_ray

    init_local_ray(
        num_cpus=6, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def launch_batch(tiny_model_dir, tmp_path_factory, request):
    """The commands of the batched launch modules this session selected, run side by side
    (tests/support/launch_testing/batch.py); each module's fixture waits for its own."""
    from launch_testing.batch import make_batch

    base = tmp_path_factory.mktemp("launch-batch")
    batch = make_batch(request.session.items, base, tiny_model_dir)
    yield batch
    batch.stop()


LIVE = Path(__file__).with_name("live")


def unit_of(nodeid: str) -> str:
    """The unit of work of a test under xdist: tests/live as one (its run is shared by the
    folder), the batched launch modules as one (their commands run side by side:
    launch_testing.batch), else the test's module (its module-scoped engines and launches are
    built once)."""
    from launch_testing.batch import MODULES, UNIT

    path = nodeid.split("::")[0]
    if path in MODULES:
        return UNIT
    return "live" if path.startswith("tests/live/") else path


def weight(items: list[pytest.Item]) -> float:
    """How early a unit should start: the longest explicit deadline of its slow or live tests (a
    proxy for their length); 0 for a unit of fast tests."""
    heavy = [i for i in items if i.get_closest_marker("slow") or i.get_closest_marker("live")]
    marks = [m.args[0] for i in heavy for m in i.iter_markers("timeout") if m.args]
    return max(marks, default=300.0 if heavy else 0.0)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's load-scope scheduling with our units (unit_of) as its scopes: a unit runs whole
    on one worker; units go out in the order the workers collected them (pytest_collection_
    modifyitems below puts the longest first)."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return UnitScheduling(config, log)


@pytest.hookimpl(trylast=True)  # after tests/live's hook has marked and ordered its tests
def pytest_collection_modifyitems(config, items):
    """On an xdist worker only: the units ordered longest first (stable: the order inside a unit,
    e.g. tests/live's, is kept). A plain `pytest` keeps the collection order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(unit_of(item.nodeid), []).append(item)
    ordered = sorted(units.values(), key=lambda members: -weight(members))
    items[:] = [item for members in ordered for item in members]

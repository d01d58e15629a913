"""Shared fixtures: the tiny model is built once per test session (no download, ~4 s), so is its
warm-started twin (~1.5 min, only for the slow tests that need it), and one local Ray instance
serves every test that starts actors. Helpers that tests of several folders
share live in tests/support/ (e.g. `engine_testing`), put on sys.path here."""

from __future__ import annotations

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
    from microcoder.learner.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def warm_model_dir(tmp_path_factory):
    """The tiny model after the default warm start, built once per session through the real CLI
    (`microcoder tiny-model --warmstart`, seed 0: the model `make run` trains; ~1.5 min) for the
    tests that need a model that already solves some problems (learning, compare, the warm
    start's window). Its `warmstart.json` holds the warm start's evaluations."""
    folder = tmp_path_factory.mktemp("warm") / "tiny-model-warm"
    cmd = [sys.executable, "-m", "microcoder", "tiny-model", "--warmstart", "--out", str(folder)]
    res = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return folder


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray instance for every test of the session that needs real actors (a second
    `ray.init` in the same process fails, so the test packages share this one). A new instance
    on loopback, as a local run gets (launch/cluster.py: init_local_ray): it never attaches to a
    cluster that `ray start` recorded on the machine."""
    import ray

    from microcoder.launch.cluster import init_local_ray

    init_local_ray(
        num_cpus=6, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    yield ray
    ray.shutdown()

"""tests/launch: its test helpers live in tests/launch/support/launch_testing/ (Chromium, synthetic
metrics, launched runs), outside the product; the tests import them as `launch_testing.*`
(pytest runs with --import-mode=importlib, which puts no test folder on sys.path, so this
conftest does)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SUPPORT = str(Path(__file__).with_name("support"))
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)


@pytest.fixture
def launched():
    """Start `microcoder launch ARGS` runs (launch_testing.launched.start_launch) that are all
    stopped at the test's end, however it ends: `run = launched(args, log=path)`."""
    from launch_testing.launched import start_launch

    runs = []

    def start(args: list[str], **kw):
        runs.append(start_launch(args, **kw))
        return runs[-1]

    yield start
    for run in runs:
        run.stop()

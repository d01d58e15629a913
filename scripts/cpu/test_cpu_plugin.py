"""Dev tool, a pytest plugin: each pytest process writes the test it runs now to
$TEST_CPU_DIR/<pid>.cur (default /tmp/test-cpu), for scripts/cpu/per_test.py to charge CPU to.

    PYTHONPATH=scripts/cpu PYTEST_ADDOPTS="-p test_cpu_plugin" make test-all"""

from __future__ import annotations

import os

FOLDER = os.environ.get("TEST_CPU_DIR", "/tmp/test-cpu")


def pytest_runtest_logstart(nodeid, location):
    os.makedirs(FOLDER, exist_ok=True)
    path = f"{FOLDER}/{os.getpid()}.cur"
    with open(path + ".tmp", "w") as f:
        f.write(nodeid)
    os.replace(path + ".tmp", path)

"""The tests' launcher helper (tests/support/launch_testing/launched.py) leaves nothing
behind: a child dies with the process that started it, even one killed with SIGKILL (no
teardown runs), and stopping a group that ignores SIGTERM kills every member. No Ray: `sleep`
and small Python processes stand in for the launcher and its Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from launch_testing.launched import LaunchedProcess

SUPPORT = str(Path(__file__).parents[1] / "support")  # tests/support: launch_testing


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def read_pid(path: Path, timeout_s: float = 30) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.1)
    raise AssertionError(f"no pid in {path} after {timeout_s} s")


def test_a_child_dies_when_the_process_that_started_it_is_sigkilled(tmp_path):
    """Without PR_SET_PDEATHSIG the `sleep` lives on under parent 1 in its own session."""
    code = (
        f"import sys, time; sys.path.insert(0, {SUPPORT!r})\n"
        "from launch_testing.launched import LaunchedProcess\n"
        "child = LaunchedProcess(['sleep', '600'])\n"
        f"open({str(tmp_path / 'child.pid')!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    child = None
    try:
        child = read_pid(tmp_path / "child.pid")
        assert alive(child)
        parent.kill()
        parent.wait()
        assert wait_gone(child, 30), f"sleep {child} outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and alive(child):
            os.kill(child, signal.SIGKILL)


def test_stop_kills_the_whole_group_even_when_it_ignores_sigterm(tmp_path):
    code = (
        "import signal, subprocess, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "p = subprocess.Popen(['sleep', '600'])\n"  # inherits the ignored SIGTERM
        f"open({str(tmp_path / 'grandchild.pid')!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)\n"
    )
    with LaunchedProcess([sys.executable, "-c", code], grace_s=1) as run:
        grandchild = read_pid(tmp_path / "grandchild.pid")
        assert os.getpgid(grandchild) == run.pid != os.getpgid(0)
    try:
        assert run.returncode == -signal.SIGKILL
        assert wait_gone(grandchild, 30), f"sleep {grandchild} of the stopped group is alive"
    finally:
        if alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_child_takes_sigint_even_when_the_test_process_ignores_it(tmp_path):
    """A test started in the background ignores SIGINT, and a child inherits that: the launcher
    would then never see the Ctrl-C the tests send it."""
    code = "import signal; print(signal.getsignal(signal.SIGINT).__name__)"
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with LaunchedProcess([sys.executable, "-c", code], log=tmp_path / "out") as run:
            assert run.wait(timeout=60) == 0
    finally:
        signal.signal(signal.SIGINT, old)
    assert (tmp_path / "out").read_text().strip() == "default_int_handler"

"""The learner's process group never waits forever for a rank: a gloo peer that never joins
ends the rendezvous, and one that joins but never arrives at a collective ends that collective,
each with an error that says which deadline passed and which config field raises it. Real gloo
groups of two processes (tests/learner/stuck_rank.py); a test takes a few seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from microcoder.learner.distributed import free_port

SCRIPT = str(Path(__file__).with_name("stuck_rank.py"))
DEADLINE_S = 3.0


def _start(role: str, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, SCRIPT, role, str(port), str(DEADLINE_S)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@pytest.mark.timeout(120)
def test_a_rank_that_never_joins_ends_the_rendezvous_naming_the_group_and_the_field():
    port = free_port()
    waiter = _start("waiter", port)
    try:
        out, _ = waiter.communicate(timeout=90)
    finally:
        _kill(waiter)
    assert waiter.returncode == 3, out[-2000:]
    assert f"learner rank 0 of 2: the process group at 127.0.0.1:{port} did not form" in out
    assert "raise learner.collective_timeout_s" in out


@pytest.mark.timeout(120)
def test_a_rank_that_stops_answering_ends_the_collective_with_the_remedy():
    port = free_port()
    stuck = _start("stuck", port)
    waiter = _start("waiter", port)
    try:
        out, _ = waiter.communicate(timeout=90)  # the stuck peer sleeps 120 s: never its exit
    finally:
        _kill(waiter)
        _kill(stuck)
    assert waiter.returncode == 3, out[-2000:]
    assert "learner rank 0: a collective of train waited more than 3 s for another rank" in out
    assert "raise learner.collective_timeout_s" in out

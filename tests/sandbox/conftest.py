"""Shared fixtures: one bwrap judge pool per test module, problem builders, host checks."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from microcoder.data.problem import validate_problem
from microcoder.sandbox import JudgePool

SECRET_ENV = "MICROCODER_TEST_SECRET"
SECRET_VALUE = "env-s3cr3t-7f1c"


def stdin_problem(tests: list[tuple[str, str]], pid: str = "p", **extra):
    """A stdin problem with (input, output) `tests`; `extra` fields (e.g. time_limit_s) added."""
    rows = [{"input": i, "output": o} for i, o in tests]
    return validate_problem({"id": pid, "kind": "stdin", "tests": rows, **extra})


def functional_problem(fn: str, tests: list[tuple[str, str]], pid: str = "p", **extra):
    """A functional problem calling `fn`, with (arguments, return value) `tests` (JSON lines)."""
    rows = [{"input": i, "output": o} for i, o in tests]
    return validate_problem(
        {"id": pid, "kind": "functional", "fn_name": fn, "tests": rows, **extra}
    )


SUM = stdin_problem([("1 2\n", "3\n"), ("40 2\n", "42\n")], pid="sum")
SUM_OK = "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.fixture(scope="module")
def pool():
    os.environ[SECRET_ENV] = SECRET_VALUE  # must stay invisible to programs
    p = JudgePool(workers=2, time_limit_s=1.0, wall_factor=2.0)
    yield p
    p.close()
    os.environ.pop(SECRET_ENV, None)


def descendants(pids: list[int]) -> set[int]:
    """Host pids of every process below the given ones (the sandboxes' contents)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), list(pids)
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


@pytest.fixture
def sandbox_processes():
    """Function: host pids of processes inside the pool's sandboxes (fork servers excluded)."""
    return lambda pool: descendants(pool.worker_pids()) - _servers(pool)


def _servers(pool: JudgePool) -> set[int]:
    return {c for pid in pool.worker_pids() for c in descendants([pid]) if _ppid(c) == pid}


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


@pytest.fixture
def healthy():
    """Function: assert the pool still judges correctly and no program process is left."""
    return assert_healthy


def assert_healthy(pool: JudgePool) -> None:
    """The pool still judges correctly, and no program process is left in any sandbox."""
    assert pool.judge(SUM, SUM_OK).verdict == "AC"
    assert descendants(pool.worker_pids()) == _servers(pool), "a program process outlived its test"


@contextmanager
def loopback_listener() -> Iterator[tuple[int, list[bytes]]]:
    """A host TCP listener on 127.0.0.1: (its port, what a connection sent, filled once the
    block ends); a sandboxed program must not reach it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(3)
    got: list[bytes] = []

    def accept():
        try:
            conn, _ = server.accept()
            got.append(conn.recv(100))
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    try:
        yield server.getsockname()[1], got
    finally:
        t.join()
        server.close()

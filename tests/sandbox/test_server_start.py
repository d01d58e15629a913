"""How a fork server starts (sandbox/bwrap.py): from a byte-compiled private copy of its modules,
with every symbol bound at start-up, neither of which the programs can tell."""

from __future__ import annotations

import importlib.util
import os
import struct
import sys

import pytest

from microcoder.sandbox.bwrap import (
    SERVER_MODULES,
    interpreter,
    server_code,
    server_code_dir,
)
from microcoder.sandbox.config import ExecutorConfig

from .conftest import stdin_problem


def test_server_code_is_a_compiled_copy_the_interpreter_accepts():
    python = interpreter(ExecutorConfig())
    folder = server_code(python)
    assert folder != server_code_dir()
    assert server_code(python) == folder  # once per process
    assert os.stat(folder).st_mode & 0o777 == 0o755
    same_version = os.path.realpath(sys._base_executable) == python
    for name in SERVER_MODULES:
        source = os.path.join(folder, name + ".py")
        with (
            open(source, "rb") as a,
            open(os.path.join(server_code_dir(), name + ".py"), "rb") as b,
        ):
            assert a.read() == b.read()
        cached = importlib.util.cache_from_source(source)
        with open(cached, "rb") as f:
            magic, flags, mtime, size = struct.unpack("<4sIII", f.read(16))
        st = os.stat(source)
        # a timestamp pyc that matches its source: the import system loads it, no compiling
        assert (flags, mtime, size) == (0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
        if same_version:
            assert magic == importlib.util.MAGIC_NUMBER


def test_server_code_made_again_when_its_folder_is_gone():
    python = interpreter(ExecutorConfig())
    folder = server_code(python)
    for name in os.listdir(os.path.join(folder, "__pycache__")):
        os.unlink(os.path.join(folder, "__pycache__", name))
    os.rmdir(os.path.join(folder, "__pycache__"))
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)  # e.g. a tmp cleaner, under a long-running judge
    again = server_code(python)
    assert again != folder
    assert os.path.isdir(os.path.join(again, "__pycache__"))


def test_server_code_falls_back_to_the_source_when_it_cannot_compile(tmp_path):
    with pytest.warns(UserWarning, match="runs from source"):
        assert server_code(str(tmp_path / "no-such-python")) == server_code_dir()


def test_programs_do_not_get_the_bind_now_variable(pool):
    """LD_BIND_NOW is set for the server's start only (bwrap.BIND_NOW): a program's os.environ
    is what it was (PATH, HOME, LANG, PWD), and what it starts does not get it either."""
    code = (
        "import os, subprocess\nprint(sorted(os.environ))\n"
        "print(subprocess.run(['/usr/bin/env'], capture_output=True, text=True).stdout.split())\n"
    )
    names = "['HOME', 'LANG', 'PATH', 'PWD']"
    values = "['PATH=/usr/bin:/bin', 'HOME=/tmp', 'LANG=C.UTF-8', 'PWD=/tmp']"
    v = pool.judge(stdin_problem([("", f"{names}\n{values}\n")]), code)
    assert v.verdict == "AC", (v.message, v.stdout)

"""What runs in the forked child, inside the sandbox: drop privileges, apply limits, run the program.

Stdlib only (it runs in the fork server's interpreter). The child sees real file descriptors:
0 = its input (a read-only memfd), 1 and 2 = memfds capped by RLIMIT_FSIZE, and for functional
and assert problems fd 3 = the pipe it reports per-test results on. Everything else is closed, so
it cannot reach the fork server's control pipe. Exit mirrors CPython's own shutdown (threads
joined, atexit run, stdout flushed, status 120 when that flush fails).
"""

from __future__ import annotations

import atexit
import builtins
import errno
import io
import json
import os
import resource
import sys
import time
import traceback

RESULT_FD = 3
FUNCTIONAL_NAMESPACE: dict = {}
"""LeetCode's customary names (typing, collections, ...), filled once by the fork server."""
FUNCTIONAL_IMPORTS = (
    "import bisect, collections, functools, heapq, itertools, math, operator, random, re, string\n"
    "from bisect import *\nfrom collections import *\nfrom functools import *\n"
    "from heapq import *\nfrom itertools import *\nfrom math import *\nfrom typing import *\n"
)


STAMPS = None
"""Dev-only profiling (`microcoder bench judge --profile`): a shared anonymous mapping, seen as
doubles, that a child writes CLOCK_MONOTONIC stamps into: [0] after `enter`, [1] before
`_exit` (in `finish`). None unless the fork server got a request with `profile` set."""


WIDE_CPUS: frozenset = frozenset()
"""The CPUs exec'd programs (C++, Java, compilers) may use when the worker is pinned: a JVM
sizes its threads by the CPUs it sees (see pin); empty = unpinned (nothing to widen)."""


def pin(cpu: int, wide: tuple[int, ...]) -> None:
    """Pin the fork server, and so every child it forks, to `cpu` (sandbox/claims.py: a worker's
    chain of wake-ups stays on one CPU); exec'd programs widen back to `wide`. A refusal (the
    CPU is not in this sandbox's cpuset) leaves the server unpinned: it is only speed."""
    global WIDE_CPUS
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError as e:
        print(f"fork server: not pinned to CPU {cpu}: {e}", file=sys.stderr)
        return
    WIDE_CPUS = frozenset(wide)


def warm_up() -> None:
    """Import what programs commonly use, once, in the fork server (children inherit it)."""
    import_random()
    exec(FUNCTIONAL_IMPORTS, FUNCTIONAL_NAMESPACE)
    for name in ("array", "copy", "decimal", "fractions", "statistics", "datetime", "string"):
        __import__(name)
    sys.set_int_max_str_digits(0)


def import_random() -> None:
    """Import `random` with a cheaper reseed in each forked child. On import, random registers
    `os.register_at_fork(after_in_child=_inst.seed)`: the Python-level Random.seed, which calls
    the C seed and sets `gauss_next = None`. Run in every child, that Python frame touches ~35
    more pages (copy-on-write faults: about 13% of a short program's run) than the C seed alone.
    The C-level seed with no argument draws the same fresh seed from os.urandom, and
    `gauss_next` is None here already (the server never draws), so every child still gets a
    seed of its own, as in a fresh interpreter. Other at-fork hooks are registered unchanged."""
    if "random" in sys.modules:
        return
    import _random

    register = os.register_at_fork
    hooks = []
    os.register_at_fork = lambda **kw: hooks.append(kw)
    try:
        import random
    finally:
        os.register_at_fork = register
    for kw in hooks:
        if kw == {"after_in_child": random._inst.seed} and random._inst.gauss_next is None:
            kw = {"after_in_child": _random.Random.seed.__get__(random._inst)}
        os.register_at_fork(**kw)


def rlimits(limits: dict) -> list[tuple[int, tuple[int, int]]]:
    """The (resource, (soft, hard)) pairs a program runs under, computed once per solution."""
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    mem = (limits.get("as_mb") or limits["memory_mb"]) << 20
    out = [
        (resource.RLIMIT_AS, (mem, mem)),
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_FSIZE, (limits["output_bytes"] + 1,) * 2),  # at _FSIZE_AT
        (resource.RLIMIT_NOFILE, (limits["open_files"],) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
    if limits.get("stack_mb"):  # compiled programs (sandbox/languages.py)
        out.append((resource.RLIMIT_STACK, (limits["stack_mb"] << 20,) * 2))
    if limits["max_processes"]:  # 0 = not enforceable here (isolation "none")
        out.append((resource.RLIMIT_NPROC, (limits["max_processes"],) * 2))
    return out


_FSIZE_AT = 2
"""Where rlimits() puts RLIMIT_FSIZE (with_output_cap replaces it there, once per run)."""


def with_output_cap(rlimits_: list, cap: int) -> list[tuple[int, tuple[int, int]]]:
    """The same rlimits (as rlimits() made them) with the file size limit set to `cap` bytes + 1
    (one byte over the cap is how the judge sees that a program went over it)."""
    out = rlimits_.copy()
    out[_FSIZE_AT] = (resource.RLIMIT_FSIZE, (cap + 1, cap + 1))
    return out


def enter(limits: list, uid: int, result_fd: int) -> None:
    """Become the program's process: session, fds, identity, rlimits. Fds 0-2 (the program's
    stdio), the working directory and the signal dispositions are inherited from the server."""
    os.setsid()
    keep = 3
    if result_fd >= 0:
        os.dup2(result_fd, RESULT_FD)
        keep = 4
    os.closerange(keep, 1 << 16)
    if uid:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    for res, value in limits:
        resource.setrlimit(res, value)
    _fresh_stdio()
    if STAMPS is not None:  # inline, not a call: the child touches no more objects than needed
        STAMPS[0] = time.monotonic()


def _stream(fd: int, mode: str):
    raw = io.FileIO(fd, mode, closefd=False)
    if mode == "r":
        return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8")
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors="backslashreplace")


_STDIO: tuple = ()
"""The programs' sys.stdin/stdout/stderr, built once in the fork server over its fds 0-2."""
_KEEP: tuple = ()
"""The server's own stdio objects, kept alive so a child replacing them frees nothing."""


def prepare_stdio() -> None:
    """Build the programs' stdio objects once, in the server (fds 0-2 must already be the
    programs' memfds). The server never uses them, so every child inherits them pristine
    (empty buffers) and needs no construction of its own (fewer copy-on-write faults).

    sys.stdin, sys.stdout (and their __std*__ twins) and sys.argv are set to the programs'
    here, once: the server reads and writes only its control fds, and never prints. A child
    then sets only sys.stderr, which stays the server's log for its own tracebacks (about 16
    fewer copy-on-write faults per run than setting all of them in the child)."""
    global _STDIO, _KEEP
    _KEEP = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__)
    _STDIO = (_stream(0, "r"), _stream(1, "w"), _stream(2, "w"))
    sys.stdin = sys.__stdin__ = _STDIO[0]
    sys.stdout = sys.__stdout__ = _STDIO[1]
    sys.argv = ["solution.py"]


def _fresh_stdio() -> None:
    if _STDIO:  # stdin, stdout and argv were set in the server (prepare_stdio)
        sys.stderr = sys.__stderr__ = _STDIO[2]
        return
    sys.stdin = sys.__stdin__ = _stream(0, "r")
    sys.stdout = sys.__stdout__ = _stream(1, "w")
    sys.stderr = sys.__stderr__ = _stream(2, "w")
    sys.argv = ["solution.py"]


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def finish(status: int) -> None:
    """Shut down like CPython: join threads, run atexit, flush stdio, then _exit."""
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        if atexit._ncallbacks():
            atexit._run_exitfuncs()
    except BaseException:  # a program's atexit must not escape the child
        pass
    try:
        sys.stdout.flush()
    except BaseException:
        status = status or 120
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    if STAMPS is not None:
        STAMPS[1] = time.monotonic()
    os._exit(status)


def run_program(code) -> None:
    """stdin problems: run the compiled module as __main__ and exit with its status."""
    namespace = {"__name__": "__main__", "__builtins__": builtins, "__file__": "solution.py"}
    status = 0
    try:
        exec(code, namespace)
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException:  # report like the interpreter does
        traceback.print_exc()
        status = 1
    finish(status)


def exec_program(command: dict) -> None:
    """C++ and Java (sandbox/languages.py): replace the child with the compiled program (or the
    compiler), `command` = {"argv": [...], "env": {extra variables}}. A program too large for
    the address-space limit cannot even be loaded: that is reported as a MemoryError (MLE)."""
    argv = command["argv"]
    if WIDE_CPUS:
        try:
            os.sched_setaffinity(0, WIDE_CPUS)
        except OSError:
            pass  # it runs on the server's CPU: slower for a JVM, never wrong
    try:
        os.execve(argv[0], argv, {**os.environ, **command.get("env", {})})
    except OSError as exc:
        kind = "MemoryError" if exc.errno == errno.ENOMEM else type(exc).__name__
        print(f"{kind}: cannot start {argv[0]}: {exc.strerror}", file=sys.stderr)
        finish(1)


def _report(i: int, tag: str, cpu: float, wall: float, text: str) -> None:
    line = f"{i}\t{tag}\t{cpu:.6f}\t{wall:.6f}\t{text}\n".encode()
    view = memoryview(line)
    while view:
        view = view[os.write(RESULT_FD, view) :]


def _error_text(exc: BaseException) -> str:
    return json.dumps(f"{type(exc).__name__}: {str(exc)[:300]}")


def _entry(namespace: dict, fn_name: str):
    cls = namespace.get("Solution")
    if isinstance(cls, type) and hasattr(cls, fn_name):
        return lambda: getattr(cls(), fn_name)
    fn = namespace.get(fn_name)
    if callable(fn):
        return lambda: fn
    raise NameError(f"no class Solution with method {fn_name!r} and no function {fn_name!r}")


def run_tests(kind: str, code, prelude, fn_name: str, tests: list[str], early_exit: bool) -> None:
    """functional / assert problems: one process per solution, results streamed on RESULT_FD.

    Each line: `index TAB tag TAB cpu_s TAB wall_s TAB json` with tag OK (json = the return value),
    FAIL (assert failed), BAD (return value not JSON-serialisable) or ERR (exception text).
    Index -1 reports a failure while loading the module.
    """
    sys.setrecursionlimit(50000)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    if kind == "functional":
        namespace.update((k, v) for k, v in FUNCTIONAL_NAMESPACE.items() if k != "__builtins__")
    c0 = time.process_time()
    w0 = time.perf_counter()
    try:
        if prelude is not None:
            exec(prelude, namespace)
        exec(code, namespace)
        entry = _entry(namespace, fn_name) if kind == "functional" else None
    except BaseException as exc:
        _report(-1, "ERR", time.process_time() - c0, time.perf_counter() - w0, _error_text(exc))
        finish(1)
    for i, test in enumerate(tests):
        c0 = time.process_time()
        w0 = time.perf_counter()
        tag = "OK"
        text = "null"
        try:
            if kind == "functional":
                args = [json.loads(line) for line in test.split("\n") if line.strip()]
                value = entry()(*args)
                try:
                    text = json.dumps(value)
                except (TypeError, ValueError) as exc:
                    tag = "BAD"
                    text = _error_text(exc)
            else:
                exec(compile(test, f"<test {i}>", "exec", dont_inherit=True), namespace)
        except AssertionError as exc:
            tag = "FAIL"
            text = _error_text(exc)
        except BaseException as exc:
            tag = "ERR"
            text = _error_text(exc)
        _report(i, tag, time.process_time() - c0, time.perf_counter() - w0, text)
        if early_exit and tag != "OK":
            break
    finish(0)

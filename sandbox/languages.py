"""C++ and Java programs: compiled once per program inside the sandbox, then run per test.

A Python program is compiled to bytecode by the fork server itself (sandbox/forkserver.py). A
`cpp` or `java` program (Problem.language, data/problem.py) travels with two command lines this
module builds on the host: the compiler's and the program's. The fork server writes the source
into the program's fresh working directory, runs the compiler there in a forked child (as the
programs' uid, under the compile limits: `executor.compile_time_s` of CPU, wall_factor × that of
wall clock, `executor.compile_memory_mb` of memory), answers `ce` with the compiler's messages
when it fails, and otherwise execs the program once per test, under the problem's limits, as it
would fork a Python one. The build lives in the working directory, which is emptied before the
next program: nothing is cached across programs.

- `cpp`: `g++ -O2 -std=c++17 -o main main.cpp`, run as `./main`; the stack limit is the memory
  limit (deep recursion is common in competitive programming; the address-space limit bounds
  both together).
- `java`: the source is saved as `P.java` and run as `java -cp . P`, where P is its public
  top-level class; without one, `Main` when a class Main is declared, else the first class
  declared. Memory: the JVM reserves far more address space than it uses (code cache, class
  space, the heap's reservation, thread stacks), so an address-space limit equal to the memory
  limit would crash it at start. The heap is capped at the memory limit instead (-Xmx: an exhausted heap throws
  java.lang.OutOfMemoryError, whose trace on stderr makes the verdict MLE), the other reservations are sized down (serial GC, 64 MiB code cache and class space,
  128 MiB metaspace), and the address space is capped at the memory limit + `JVM_HEADROOM_MB`,
  which bounds native allocations. The JVM's own threads (GC, JIT, signal, reference
  handling: ~15) are allowed beside the program's `max_processes` (+ `JVM_THREADS`). javac is
  a JVM too: the compile memory limit is its heap.

The compilers must be installed on the judge's host (`check_compilers`, called when an executor
starts on a problem store that holds such problems, names the package); they run from /usr,
which the sandbox mounts read-only, plus the JVM's configuration directory when it lies outside
/usr (Debian's /etc/java-N-openjdk: `host_ro_paths`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Iterable

from microcoder.sandbox.unavailable import SandboxUnavailable

COMPILED = ("cpp", "java")
"""The languages the sandbox compiles before running (the others: Python)."""
TOOLS = {"cpp": ("g++",), "java": ("javac", "java")}
"""The host programs each compiled language needs."""
PACKAGES = {
    "cpp": "g++ (Debian/Ubuntu: apt-get install g++)",
    "java": "a JDK (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)",
}
"""What to install when a language's tools are missing."""
JVM_HEADROOM_MB = 1024
"""Address space (MiB) a JVM may reserve beyond its heap: code cache, class space, metaspace,
thread stacks and the runtime's own mappings (1 GiB measured enough with the flags below, for
OpenJDK 17 on x86-64; the RSS they cost is ~40 MiB)."""
JVM_THREADS = 32
"""Threads a JVM may run beside the program's own (`max_processes`): ~15 with the serial GC."""
JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:MaxMetaspaceSize=128m",
    "-XX:-UsePerfData",
    "-Xshare:auto",
)
"""Flags of every JVM the judge starts (the program's and javac's): small reservations, no
hsperfdata files."""
JVM_ENV = {"MALLOC_ARENA_MAX": "2"}
"""glibc reserves a 64 MiB malloc arena per thread that allocates; a JVM's dozen threads would
spend the address-space headroom on them (measured: the JVM then fails to start under 1.5 GiB)."""
JAVA_STACK_MB = 64
"""The Java main thread's stack (-Xss), within the address-space headroom."""

_PUBLIC_CLASS = re.compile(r"^\s*public\s+(?:(?:final|abstract|strictfp)\s+)*class\s+(\w+)", re.M)
_ANY_CLASS = re.compile(r"^\s*(?:(?:public|final|abstract|strictfp)\s+)*class\s+(\w+)", re.M)
_MAIN_CLASS = re.compile(r"^\s*(?:(?:public|final|abstract|strictfp)\s+)*class\s+Main\b", re.M)


def java_class(code: str) -> str:
    """The class a Java program runs as (the module docstring's rule)."""
    public = _PUBLIC_CLASS.search(code)
    if public:
        return public.group(1)
    if _MAIN_CLASS.search(code):
        return "Main"
    first = _ANY_CLASS.search(code)
    return first.group(1) if first else "Main"


@functools.lru_cache(maxsize=8)
def tool_path(name: str) -> str | None:
    """A host tool's real path (alternatives links resolved: the sandbox has no /etc), or None."""
    found = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
    return os.path.realpath(found) if found else None


def missing_tools(languages: Iterable[str]) -> list[str]:
    """For each language whose tools this host lacks: what to install (empty: all present)."""
    out = []
    for language in sorted(set(languages) & set(COMPILED)):
        lacking = [t for t in TOOLS[language] if tool_path(t) is None]
        if lacking:
            out.append(f"{language} needs {' and '.join(lacking)}: install {PACKAGES[language]}")
    return out


def check_compilers(languages: Iterable[str], where: str = "the problems") -> None:
    """Raise SandboxUnavailable naming the package to install when `languages` need a compiler or a
    runtime this host lacks (called at executor start, by `data build` and `microcoder judge`)."""
    lacking = missing_tools(languages)
    if lacking:
        raise SandboxUnavailable(
            f"{where} hold programs this host cannot compile or run: {'; '.join(lacking)}. "
            "Install it on every node that runs an executor (or drop those problems)."
        )


@functools.lru_cache(maxsize=1)
def host_ro_paths() -> tuple[str, ...]:
    """Host directories outside /usr the installed toolchains read (the JVM's configuration,
    which Debian keeps in /etc/java-N-openjdk and links from the JDK's conf/)."""
    java = tool_path("java")
    if java is None:
        return ()
    conf = os.path.join(os.path.dirname(os.path.dirname(java)), "conf")
    targets = []
    for root, _, files in os.walk(conf):
        for name in files:
            target = os.path.realpath(os.path.join(root, name))
            if not target.startswith("/usr/"):
                targets.append(os.path.dirname(target))
    return (os.path.commonpath(targets),) if targets else ()


def _jvm(prefix: str, heap_mb: int) -> list[str]:
    return [f"{prefix}-Xmx{heap_mb}m"] + [prefix + flag for flag in JVM_FLAGS]


def _need(name: str) -> str:
    path = tool_path(name)
    if path is None:
        check_compilers(["cpp" if name == "g++" else "java"], "this program")
    return path


def program_request(language: str, code: str, limits: dict, compile_limits: dict) -> dict:
    """The request fields that tell the fork server how to compile and run a `cpp` or `java`
    program; `limits` (the run's, from grade.limits_for) get the language's address space,
    stack and process count."""
    memory = limits["memory_mb"]
    if language == "cpp":
        limits["stack_mb"] = memory
        return {
            "source": "main.cpp",
            "compile": {"argv": [_need("g++"), "-O2", "-std=c++17", "-o", "main", "main.cpp"]},
            "run": {"argv": ["./main"]},
            "compile_limits": compile_limits,
        }
    cls = java_class(code)
    limits["as_mb"] = memory + JVM_HEADROOM_MB
    limits["max_processes"] = limits["max_processes"] and limits["max_processes"] + JVM_THREADS
    compile_limits["as_mb"] = compile_limits["memory_mb"] + JVM_HEADROOM_MB
    compile_limits["max_processes"] = compile_limits["max_processes"] and (
        compile_limits["max_processes"] + JVM_THREADS
    )
    javac = [_need("javac")] + _jvm("-J", compile_limits["memory_mb"])
    run = [_need("java"), *_jvm("", memory), f"-Xss{JAVA_STACK_MB}m"]
    javac += ["-encoding", "UTF-8", "-nowarn", "-d", ".", f"{cls}.java"]
    run += ["-cp", ".", cls]
    return {
        "source": f"{cls}.java",
        "compile": {"argv": javac, "env": JVM_ENV},
        "run": {"argv": run, "env": JVM_ENV},
        "compile_limits": compile_limits,
    }

"""How a fork server is started: the bubblewrap command line, its user namespace, or bare.

bwrap isolation: new PID, network, IPC, UTS and cgroup namespaces; an empty root with only
/usr (and its /lib, /bin links), the interpreter's prefix and the judge's own fork-server code
(a byte-compiled private copy, `server_code`) mounted read-only; fresh /proc, minimal /dev, a private size-capped /tmp; no environment but
PATH/HOME/LANG; a new session (no terminal); dies with the judge. The fork server is PID 1.

Process bound: as root, each worker gets its own user namespace mapping in-sandbox uid 1000 to
a host uid of its own, claimed host-wide from [sandbox_uid_base, sandbox_uid_base + 4096) through
a lock file (sandbox/claims.py: no two workers of any pools on the host share one); programs run as
that uid (RLIMIT_NPROC counts per real uid and is ignored only for host root, so it holds),
cannot signal or trace the fork server (uid 0 of the namespace with only the capabilities it
needs), and are their worker's only processes. Not root: bwrap's own unprivileged user
namespace; programs keep the caller's uid, no host uid is claimed, and RLIMIT_NPROC counts the
processes of that uid inside the sandbox's namespace.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.languages import host_ro_paths
from microcoder.sandbox.unavailable import SandboxUnavailable

SANDBOX_UID = 1000
"""The programs' uid inside the sandbox (root hosts)."""
CODE_DIR = "/opt/microcoder-judge"
"""Where the fork server's own code is mounted inside the sandbox."""
SERVER_CAPS = (
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_KILL",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_CHOWN",
)


BWRAP_ENV = "MICROCODER_BWRAP"
"""Environment variable naming the bubblewrap binary (default: `bwrap` on PATH)."""
PROBE_TIMEOUT_S = 20.0
"""How long the start-up probe of bubblewrap may take."""
NO_USERNS_HELP = (
    "Containers often deny user namespaces (Docker's default seccomp profile, "
    "kernel.unprivileged_userns_clone = 0, user.max_user_namespaces = 0). Ways out: set "
    'executor.isolation = "none" to run TRUSTED code only, without any isolation; or set '
    'executor.backend = "http" and executor.judge_url to a `microcoder judge serve` running on '
    "a host that allows them (docs/architecture.md, the judge service)."
)


def bwrap_binary() -> str:
    """The bubblewrap binary: $MICROCODER_BWRAP, else `bwrap`."""
    return os.environ.get(BWRAP_ENV) or "bwrap"


@functools.lru_cache(maxsize=8)
def userns_probe(binary: str) -> str:
    """Run bubblewrap once (per binary and process) in a new user and PID namespace; "" when it
    works, else why not (its stderr)."""
    cmd = [binary, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--", "true"]
    try:
        done = subprocess.run(
            cmd, capture_output=True, timeout=PROBE_TIMEOUT_S, env={"PATH": "/usr/bin:/bin"}
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if done.returncode == 0:
        return ""
    err = done.stderr.decode(errors="replace").strip()[-300:]
    return err or f"exit status {done.returncode}"


def interpreter(cfg: ExecutorConfig) -> str:
    """The Python that runs programs (the judge's base interpreter unless configured)."""
    return os.path.realpath(cfg.python or getattr(sys, "_base_executable", sys.executable))


def server_code_dir() -> str:
    return str(Path(__file__).resolve().parent)


SERVER_MODULES = ("forkserver", "childproc", "frames", "serverenv")
"""The fork server's own modules (stdlib only; forkserver imports the other three)."""
BIND_NOW = {"LD_BIND_NOW": "1"}
"""Set for the fork server's interpreter, which removes it from its environment at once (the
programs' os.environ never has it; only their /proc/self/environ, the server's start-up block,
shows it): the dynamic linker then binds every symbol at start-up, in the server, instead of
lazily in every forked child (a child's first call of a function the server never called:
CPython's after-fork code, setsid, setuid, setrlimit, ... cost a symbol lookup and a
copy-on-write fault on the binding table, in every run)."""
_COMPILED: dict[str, str] = {}
_COMPILED_LOCK = threading.Lock()  # a pool's threads start their workers at once


def server_code(python: str) -> str:
    """The folder the fork server's modules are imported from: a private copy of them,
    byte-compiled once per process by `python` itself (so its .pyc files match that
    interpreter). Imported from source, the compiler's garbage stayed in the server's heap,
    which every run's fork copies the page tables of and every exit tears down, and the code
    objects lay scattered (more copy-on-write faults per run). Falls back to the source folder
    (slower, same behaviour) when the copy cannot be made; removed at exit by the process that
    made it."""
    with _COMPILED_LOCK:
        made = _COMPILED.get(python)
        if made is None or not os.path.isdir(made):
            made = _compile_server(python)
        return made


def _compile_server(python: str) -> str:
    try:
        target = tempfile.mkdtemp(prefix="microcoder-judge-code-")
        atexit.register(_remove_compiled, target, os.getpid())
        files = []
        for name in SERVER_MODULES:
            dst = os.path.join(target, name + ".py")
            shutil.copy2(os.path.join(server_code_dir(), name + ".py"), dst)
            files.append(dst)
        os.chmod(target, 0o755)  # as the source folder: readable inside the sandbox
        subprocess.run(
            [python, "-I", "-S", "-c", _COMPILE, *files],
            check=True,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            env={"PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.SubprocessError) as e:
        warnings.warn(
            f"the judge's fork server runs from source (compiling failed: {e})", stacklevel=3
        )
        return server_code_dir()
    _COMPILED[python] = target
    return target


_COMPILE = (
    "import py_compile, sys\nfor f in sys.argv[1:]:\n    py_compile.compile(f, doraise=True)\n"
)


def _remove_compiled(path: str, owner: int) -> None:
    if os.getpid() == owner:  # not in a forked child that exits: its parent still uses it
        shutil.rmtree(path, ignore_errors=True)


def bootstrap(code_dir: str, uid: int, workdir: str, cpus: tuple = ()) -> str:
    """The fork server's `-c` program; `cpus` = (its CPU, every CPU its compiled programs may
    use) when the worker is pinned (sandbox/claims.py), else ()."""
    return (
        f"import sys; sys.path.insert(0, {code_dir!r}); import forkserver; "
        f"sys.path.remove({code_dir!r}); forkserver.main({uid}, {workdir!r}, {tuple(cpus)!r})"
    )


def check_available(cfg: ExecutorConfig) -> None:
    """Raise SandboxUnavailable when bwrap isolation is configured but cannot work here: no
    bubblewrap, or (one probe per process, `userns_probe`) no user namespace for it. Called when
    a pool starts (an executor's start), so such a host fails once, naming the cause and the
    ways out, never program by program."""
    if cfg.isolation != "bwrap":
        return
    if shutil.which(bwrap_binary()) is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, so untrusted code cannot be isolated. Install "
            "it (Debian/Ubuntu: apt-get install bubblewrap; scripts/setup.sh does this), or set "
            'executor.isolation = "none" to run TRUSTED code only without any isolation.'
        )
    if os.geteuid() == 0 and shutil.which("unshare") is None:
        raise SandboxUnavailable("`unshare` (util-linux) is missing; install util-linux")
    why = userns_probe(bwrap_binary())
    if why:
        raise SandboxUnavailable(
            f"bubblewrap cannot create a user namespace on this host (`{bwrap_binary()} "
            f"--unshare-user --unshare-pid ... true` failed: {why}). {NO_USERNS_HELP}"
        )


def make_userns(outer_uid: int) -> int:
    """(root only) A user namespace mapping uid/gid 0→0 and SANDBOX_UID→outer_uid; returns its fd."""
    helper = subprocess.Popen(
        ["unshare", "--user", "--", "sh", "-c", "echo ready; read x"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        if helper.stdout.readline().strip() != b"ready":
            raise SandboxUnavailable("could not create a user namespace (unshare --user failed)")
        mapping = f"0 0 1\n{SANDBOX_UID} {outer_uid} 1\n"
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{helper.pid}/{name}", "w") as f:
                f.write(mapping)
        return os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        helper.stdin.close()
        helper.wait()


def _root_binds(cfg: ExecutorConfig) -> list[str]:
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    prefix = os.path.dirname(os.path.dirname(interpreter(cfg)))
    paths = list(cfg.extra_ro_paths) + list(host_ro_paths())  # e.g. the JVM's /etc config
    if not prefix.startswith("/usr/") and prefix != "/usr":
        paths.insert(0, prefix)
    for path in paths:
        # traversable parents (bwrap would copy e.g. /root's 0700 and lock the programs out)
        for parent in reversed(Path(path).parents[:-1]):
            args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", path, path]
    return args


def needs_host_uid(cfg: ExecutorConfig) -> bool:
    """Whether a worker's programs run as a host uid of their own (bwrap isolation as root)."""
    return cfg.isolation == "bwrap" and os.geteuid() == 0


def sandbox_command(
    cfg: ExecutorConfig, host_uid: int | None, cpus: tuple = ()
) -> tuple[list[str], tuple[int, ...]]:
    """argv and fds to pass for one worker's fork server (the fds are closed by the caller);
    `host_uid`: its programs' host uid (sandbox/claims.py), needed when `needs_host_uid(cfg)`;
    `cpus`: (its CPU, the CPUs of compiled programs) when pinned (sandbox/claims.py)."""
    python = interpreter(cfg)
    if cfg.isolation == "none":
        workdir = tempfile.mkdtemp(prefix="microcoder-judge-")
        code = bootstrap(server_code(python), 0, workdir, cpus)
        return [python, "-I", "-S", "-B", "-c", code], ()
    args = [bwrap_binary(), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--die-with-parent", "--as-pid-1", "--new-session"]
    fds: tuple[int, ...] = ()
    if os.geteuid() == 0:
        if host_uid is None:
            raise ValueError(
                "a root host's sandbox needs the programs' host uid (sandbox/claims.py)"
            )
        fd = make_userns(host_uid)
        fds = (fd,)
        args += ["--userns", str(fd), "--cap-drop", "ALL"]
        for cap in SERVER_CAPS:
            args += ["--cap-add", cap]
        uid = SANDBOX_UID
    else:
        args += ["--unshare-user", "--cap-drop", "ALL"]
        uid = 0
    args += _root_binds(cfg)
    args += ["--ro-bind", server_code(python), CODE_DIR]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", "--size", str(cfg.tmpfs_mb << 20), "--tmpfs", "/tmp"]
    args += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp"]
    args += ["--setenv", "LANG", "C.UTF-8", "--chdir", "/tmp"]
    for name, value in BIND_NOW.items():
        args += ["--setenv", name, value]
    args += ["--", python, "-I", "-S", "-B", "-c", bootstrap(CODE_DIR, uid, "/tmp/w", cpus)]
    return args, fds

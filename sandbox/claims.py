"""What each judge worker claims host-wide through lock files: a host uid (root hosts) and a CPU.

A claim is an exclusive, non-blocking `flock` on a lock file, held through its fd for the
worker's lifetime; the kernel drops it when the process exits, even on kill -9, so no claim
leaks, and every pool on the host (several executors on one node, an evaluation's executors, a
`microcoder judge` beside a run) sees the others' claims.

## Host uids (root hosts, bwrap)

As root, a worker's programs run as a host uid of their own (sandbox/bwrap.py: the worker's
user namespace maps its in-sandbox uid 1000 to it), so that RLIMIT_NPROC (`max_processes`)
counts one program's processes only. A uid must therefore never serve two workers at once,
whichever pools they belong to. A worker takes the lowest uid in [sandbox_uid_base,
sandbox_uid_base + UID_RANGE) whose lock file, UID_LOCK_DIRS/<uid>.lock, it can lock. A lock
file host-wide, rather than a base per executor replica index, also covers the pools that have
no replica index and several runs on one host.

The limit: the lock directory is shared only by processes that see the same /run (or /tmp, the
fallback). Containers with private /run and /tmp on one host, whose root is the host's root
(no user namespace of their own), do not see each other's locks: give each a different
`executor.sandbox_uid_base`, at least UID_RANGE apart. With a user namespace per container (the
usual rootless setup) uids are distinct on the host already.

On Linux >= 5.14 the process count is also kept per user namespace (each worker has its own), so
two workers sharing a uid no longer trip each other's bound there; older kernels count per host
uid, and a shared uid gives spurious runtime errors (a thread or fork refused). Not root: bwrap
makes an unprivileged user namespace, programs keep the caller's uid, and no host uid is claimed.

## A CPU per worker (`executor.pin_cpus`)

Why: judging a short program is a chain of wake-ups: the host thread sends the request, the
fork server forks, the program exits and wakes the server, the server's `done` frame wakes the
host thread, whose `next` wakes the server for the following test. One worker's chain is
sequential (each step waits for the one before), so running it on one CPU loses no parallelism,
while a wake-up across CPUs is dear: a pipe round trip between two processes costs 22-33 µs
of CPU when they sit on two CPUs of this project's VM and 2.5 µs on one (an idle CPU woken by an
inter-processor interrupt, through the hypervisor; scripts/cpu/wakeup.py measures a host). Pinned workers judge the bench's short
programs 13-21 % faster in wall time (bench/RESULTS.md, "Judge speed: a CPU per worker").

How a worker gets one: among the CPUs this process may run on (its affinity mask: a container's
or Ray's cpuset included), the least claimed on the host, counted over every pool (executors,
evaluations, `microcoder judge`) through lock files CPU_LOCK_DIRS/<cpu>.<k>.lock:
a worker takes the first free file of level k = 0 over all CPUs, then k = 1, ... and holds it
for its lifetime, so two pools on one host spread over its CPUs instead of stacking on the
first ones. More workers than CPUs share them evenly.

Limits: the lock folder is per user (processes of other users, and containers with a private
/run and /tmp, do not see these claims; their workers may then share a CPU with ours); other
programs on the host are not counted (a pinned worker cannot move to an idle CPU while its own
is busy with them: set `executor.pin_cpus = false` on hosts whose CPUs other work saturates).
C++ and Java programs (and their compilers) run on every CPU of the mask (a JVM sizes its
threads by the CPUs it sees). A program may change its own affinity: that only moves it.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import stat
import warnings

from microcoder.sandbox.bwrap import SandboxUnavailable

UID_RANGE = 4096
"""Uids a host may hand out from `sandbox_uid_base`: the most workers judging on a host at once."""
UID_LOCK_DIRS = ("/run/microcoder-sandbox-uids", "/tmp/microcoder-sandbox-uids")
"""Where the uid lock files live: the first of these that is usable (root-owned, 0700)."""
RESERVED = frozenset({65534, 65535, 2**32 - 1})
"""Never handed out: nobody/nogroup, the 16-bit and 32-bit invalid uids."""
CPU_LOCK_DIRS = (
    f"/run/microcoder-judge-cpus-{os.geteuid()}",
    f"/tmp/microcoder-judge-cpus-{os.geteuid()}",
)
"""Where the CPU claims live: the first usable of these (owned by this user, mode 0700)."""


class Claim:
    """One claim held through its lock file's fd; `release()` frees it (idempotent)."""

    def __init__(self, fd: int):
        self._fd = fd

    def release(self) -> None:
        fd = self._fd
        self._fd = None
        if fd is not None:
            os.close(fd)  # closing the last fd of the open file drops the flock


class UidClaim(Claim):
    def __init__(self, uid: int, fd: int):
        super().__init__(fd)
        self.uid = uid


class CpuClaim(Claim):
    def __init__(self, cpu: int, allowed: tuple[int, ...], fd: int):
        super().__init__(fd)
        self.cpu = cpu
        self.allowed = allowed
        """The CPUs the claimer could run on (C++/Java programs keep all of them)."""


# -- host uids ------------------------------------------------------------------------------
def claim_uid(base: int) -> UidClaim:
    """Lock and return the lowest free uid of [base, base + UID_RANGE) on this host."""
    folder = uid_lock_dir()
    for uid in range(base, base + UID_RANGE):
        if uid in RESERVED:
            continue
        fd = try_lock(os.path.join(folder, f"{uid}.lock"))
        if fd is not None:
            return UidClaim(uid, fd)
    raise SandboxUnavailable(
        f"all {UID_RANGE} sandbox uids from executor.sandbox_uid_base = {base} are held by "
        f"judge workers on this host (lock files in {folder}): run fewer workers on it "
        "(executor.workers, num_executors), or set executor.sandbox_uid_base to a free range"
    )


def uid_lock_dir() -> str:
    """The first usable folder of UID_LOCK_DIRS, made if missing (root-owned, 0700)."""
    return lock_dir(UID_LOCK_DIRS, "sandbox uid")


# -- CPUs -----------------------------------------------------------------------------------
def allowed_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on, in order (empty where the OS cannot tell)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return ()


def claim_cpu(allowed: tuple[int, ...] | None = None) -> CpuClaim | None:
    """Claim the least claimed CPU of `allowed` (default: this process's) on this host; None,
    with a warning, when no lock folder is usable (the worker then runs unpinned)."""
    allowed = allowed_cpus() if allowed is None else allowed
    if not allowed:
        return None
    try:
        folder = lock_dir(CPU_LOCK_DIRS, "judge CPU")
        for level in itertools.count():  # a level's files all held: the next has free ones
            for cpu in allowed:
                fd = try_lock(os.path.join(folder, f"{cpu}.{level}.lock"))
                if fd is not None:
                    return CpuClaim(cpu, allowed, fd)
    except (SandboxUnavailable, OSError) as e:  # pinning is only speed: never a failure
        warnings.warn(f"judge workers run unpinned: {e}", stacklevel=2)
    return None


def pin_this_thread(cpu: int) -> None:
    """Run the calling thread (only it: Linux's sched_setaffinity of tid 0) on `cpu`; a refusal
    (the CPU left this process's cpuset meanwhile) leaves it unpinned: only slower."""
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass


# -- lock files -----------------------------------------------------------------------------
def lock_dir(folders: tuple[str, ...], what: str) -> str:
    """The first usable folder of `folders`, made if missing (owned by this user, mode 0700:
    nobody else can take or fake a claim); SandboxUnavailable naming each folder's problem."""
    problems = []
    for folder in folders:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            st = os.lstat(folder)
        except OSError as e:
            problems.append(f"{folder}: {e.strerror}")
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            problems.append(f"{folder}: not a directory owned by uid {os.geteuid()}, mode 0700")
            continue
        return folder
    raise SandboxUnavailable(
        f"no folder for the {what} locks: " + "; ".join(problems) + ". Remove or fix it "
        f"(owned by uid {os.geteuid()}, mode 0700)"
    )


def try_lock(path: str) -> int | None:
    """The fd holding an exclusive lock on `path` (made if missing), or None when another
    process holds it. Closing the fd (its last copy) releases the claim."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd

"""Host uids for the programs of root hosts' sandboxes: one per worker, unique on the host.

As root, a worker's programs run as a host uid of their own (sandbox/bwrap.py: the worker's
user namespace maps its in-sandbox uid 1000 to it), so that RLIMIT_NPROC (`max_processes`)
counts one program's processes only. A uid must therefore never serve two workers at once,
whichever pools they belong to: several executors on one node, an evaluation's executors, a
`microcoder judge` beside a run.

How a worker gets one: it takes the lowest uid in [sandbox_uid_base, sandbox_uid_base +
UID_RANGE) whose lock file, LOCK_DIR/<uid>.lock, it can lock (an exclusive, non-blocking
`flock`), and holds the lock for its lifetime; the kernel drops it when the process exits, even
on kill -9, so no uid leaks. A lock file host-wide, rather than a base per executor replica
index, also covers the pools that have no replica index and several runs on one host.

The limit: the lock directory is shared only by processes that see the same /run (or /tmp, the
fallback). Containers with private /run and /tmp on one host, whose root is the host's root
(no user namespace of their own), do not see each other's locks: give each a different
`executor.sandbox_uid_base`, at least UID_RANGE apart. With a user namespace per container (the
usual rootless setup) uids are distinct on the host already.

On Linux >= 5.14 the process count is also kept per user namespace (each worker has its own), so
two workers sharing a uid no longer trip each other's bound there; older kernels count per host
uid, and a shared uid gives spurious runtime errors (a thread or fork refused). Not root: bwrap
makes an unprivileged user namespace, programs keep the caller's uid, and no host uid is claimed.
"""

from __future__ import annotations

import fcntl
import os
import stat

from microcoder.sandbox.bwrap import SandboxUnavailable

UID_RANGE = 4096
"""Uids a host may hand out from `sandbox_uid_base`: the most workers judging on a host at once."""
LOCK_DIRS = ("/run/microcoder-sandbox-uids", "/tmp/microcoder-sandbox-uids")
"""Where the uid lock files live: the first of these that is usable (root-owned, 0700)."""
RESERVED = frozenset({65534, 65535, 2**32 - 1})
"""Never handed out: nobody/nogroup, the 16-bit and 32-bit invalid uids."""


class UidClaim:
    """One host uid held through its lock file's fd; `release()` frees it (idempotent)."""

    def __init__(self, uid: int, fd: int):
        self.uid = uid
        self._fd = fd

    def release(self) -> None:
        fd = self._fd
        self._fd = None
        if fd is not None:
            os.close(fd)  # closing the last fd of the open file drops the flock


def claim_uid(base: int) -> UidClaim:
    """Lock and return the lowest free uid of [base, base + UID_RANGE) on this host."""
    folder = lock_dir()
    for uid in range(base, base + UID_RANGE):
        if uid in RESERVED:
            continue
        fd = os.open(
            os.path.join(folder, f"{uid}.lock"),
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidClaim(uid, fd)
    raise SandboxUnavailable(
        f"all {UID_RANGE} sandbox uids from executor.sandbox_uid_base = {base} are held by "
        f"judge workers on this host (lock files in {folder}): run fewer workers on it "
        "(executor.workers, num_executors), or set executor.sandbox_uid_base to a free range"
    )


def lock_dir() -> str:
    """The first usable folder of LOCK_DIRS, made if missing (root-owned, no write for others)."""
    problems = []
    for folder in LOCK_DIRS:
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
        "no folder for the sandbox uid locks: " + "; ".join(problems) + ". Remove or fix it "
        "(root-owned, mode 0700)"
    )

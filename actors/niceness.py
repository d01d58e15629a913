"""Lower, then restore, the OS scheduling priority (niceness) of this process and every process
below it, thread by thread: a held-out eval beside training on a CPU run (eval.nice,
launch/run/eval_beside.py) runs its engine and judge work this way, so that the learner, which
shares the cores, takes the CPU first and the eval gets what is left.

Linux keeps a niceness per thread (a new thread or child inherits its creator's), so every thread
of every process of the tree is set, from /proc. Raising a niceness is always allowed; lowering it
back needs CAP_SYS_NICE or an RLIMIT_NICE that reaches the old value. Where neither holds, a
lowered engine would stay slow for the rest of the run, so `lower` then changes nothing and says
why (`Lowered.skipped`). Threads and children born while lowered inherit the lowered value;
`restore` gives each the old value of its process (or of its nearest known parent).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field

MAX_NICE = 19
CAP_SYS_NICE = 23


def _stat(pid: int) -> tuple[int, int]:
    """(parent pid, niceness) of a process or thread, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[16])


def process_tree(root: int) -> list[int]:
    """`root` and every process below it (pids), parents before children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid, _ = _stat(int(entry))
            except (OSError, ValueError, IndexError):
                continue  # exited meanwhile
            children.setdefault(ppid, []).append(int(entry))
    out = []
    todo = [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return out


def threads(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def thread_nice(tid: int) -> int:
    return _stat(tid)[1]


def can_restore(to: int) -> bool:
    """Whether this process may set a niceness back down to `to`: CAP_SYS_NICE, or an
    RLIMIT_NICE soft limit of at least 20 - `to` (the lowest niceness it allows)."""
    try:
        with open("/proc/self/status") as f:
            caps = next(line for line in f if line.startswith("CapEff:"))
        if int(caps.split()[1], 16) >> CAP_SYS_NICE & 1:
            return True
    except (OSError, StopIteration, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    return soft == resource.RLIM_INFINITY or 20 - soft <= to


@dataclass
class Lowered:
    """What `lower` did: the old niceness and policy of each thread it set, by process."""

    by: int
    idle: bool = False
    """Whether the threads were also put under SCHED_IDLE."""
    old: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    """{pid: {tid: (niceness, scheduling policy) before}}."""
    skipped: str = ""
    """Why nothing was lowered (empty when it was)."""


def _set(tid: int, nice: int, policy: int | None = None) -> None:
    try:
        if policy is not None:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except (ProcessLookupError, PermissionError):
        pass  # exited meanwhile; or (restore) not allowed, which `lower` checked beforehand


def lower(by: int, root: int | None = None, idle: bool = False) -> Lowered:
    """Add `by` to the niceness of every thread of `root` (default this process) and of every
    process below it, up to 19; `idle`: also put them under SCHED_IDLE (they run only when no
    normal thread of the same group wants the CPU, and a waking normal thread preempts them)."""
    root = os.getpid() if root is None else root
    done = Lowered(by, idle)
    if by <= 0 and not idle:
        done.skipped = "eval.nice = 0"
        return done
    base = thread_nice(root)
    if not can_restore(base):
        done.skipped = (
            f"this user may not set the niceness back to {base} afterwards (no CAP_SYS_NICE, "
            f"RLIMIT_NICE too low): the eval runs at the actors' own priority; run with "
            f"`ulimit -e {20 - base}` (or as a user with CAP_SYS_NICE) to let it run lower"
        )
        return done
    for pid in process_tree(root):
        for tid in threads(pid):
            try:
                nice = thread_nice(tid)
                policy = os.sched_getscheduler(tid)
            except (OSError, ValueError, IndexError):
                continue
            done.old.setdefault(pid, {})[tid] = (nice, policy)
            _set(tid, min(MAX_NICE, nice + by), os.SCHED_IDLE if idle else None)
    return done


def restore(done: Lowered, root: int | None = None) -> None:
    """Set every thread of the tree back to its niceness before `lower` (a thread or process
    born since gets its process's, or its nearest known parent's, old value)."""
    if not done.old:
        return
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    for pid in process_tree(root):
        try:
            parents[pid] = _stat(pid)[0]
        except (OSError, ValueError, IndexError):
            continue
        old = done.old.get(pid)
        p = pid
        while old is None and p in parents:
            p = parents[p]
            old = done.old.get(p)
        if old is None:
            continue
        base = old.get(pid, min(old.values()))
        for tid in threads(pid):
            nice, policy = old.get(tid, base)
            _set(tid, nice, policy if done.idle else None)


class PriorityControl:
    """The two actor methods a beside-training eval calls on the generators it holds and on the
    executors (Generator and Executor inherit them)."""

    _lowered: Lowered | None = None

    def lower_priority(self, by: int, idle: bool = False) -> str:
        """Run this actor's process tree `by` nicer (`idle`: under SCHED_IDLE too) until
        `restore_priority` (once: a second call before the restore changes nothing). Returns why
        nothing was lowered, or ""."""
        if self._lowered is None:
            self._lowered = lower(by, idle=idle)
        return self._lowered.skipped

    def restore_priority(self) -> None:
        lowered = self._lowered
        self._lowered = None
        if lowered is not None:
            restore(lowered)

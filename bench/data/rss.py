"""Peak resident memory of a launched run's processes, by role, sampled from outside.

A sampler thread reads every process's RSS (psutil) every `interval_s` and keeps, per role, the
largest RSS any process of that role had at one sample (RSS of the process alone, not its
children: an executor's sandbox workers are not the executor). Roles are named by a predicate on
(pid, cmdline): the launcher is the pid the bench started; Ray actors' processes rename
themselves `ray::ClassName...` or `ray::mc-NAME:ClassName.method` (`actor_role`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psutil

Match = Callable[[int, list[str]], bool]
"""(pid, cmdline) -> whether the process has the role."""

MB = 2**20


def actor_role(class_name: str) -> Match:
    """Processes of the Ray actor class `class_name` (its title: `ray::[NAME:]Class[.method]`)."""

    def match(_pid: int, cmdline: list[str]) -> bool:
        if not cmdline or not cmdline[0].startswith("ray::"):
            return False
        title = cmdline[0][len("ray::") :].split(":")[-1]
        return title.split(".")[0] == class_name

    return match


def pid_role(pid: int) -> Match:
    return lambda p, _cmdline: p == pid


class PeakSampler:
    """`with PeakSampler({"driver": pid_role(p), ...}) as s:` ... `s.peaks_mb` (role -> MB, 0.0
    while no process of the role was seen); `s.samples`: sampling rounds done."""

    def __init__(self, roles: dict[str, Match], interval_s: float = 0.2):
        self.roles = roles
        self.interval_s = interval_s
        self.peaks_mb = {role: 0.0 for role in roles}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        """One round over every process."""

        for proc in psutil.process_iter(["pid", "cmdline", "memory_info"]):
            info = proc.info
            mem = info.get("memory_info")
            cmdline = info.get("cmdline") or []
            if mem is None:  # gone, or not ours to read
                continue
            for role, match in self.roles.items():
                if match(info["pid"], cmdline):
                    self.peaks_mb[role] = max(self.peaks_mb[role], mem.rss / MB)
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.sample()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - t0)))

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

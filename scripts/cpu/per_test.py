"""Dev tool: the CPU seconds of a test run, charged to the test module each pytest worker ran.

    python scripts/cpu/per_test.py OUT.json &      # then, beside it:
    PYTHONPATH=scripts/cpu PYTEST_ADDOPTS="-p test_cpu_plugin" make test-all

Every 2 s it reads every process's user + system time (/proc/<pid>/stat) and charges what each
used since the last read to the test its nearest pytest ancestor was running then (the plugin
test_cpu_plugin.py names it): a launch, its Ray and vLLM processes and its sandboxes count for
the test that started them. CPU of processes with no pytest ancestor is "_other" (CPU they used
before the first read is not counted). It also keeps the machine's idle fraction. OUT.json is
rewritten every 20 s: {"idle_frac", "cpu_s", "by_module": {module: CPU s}}. Used for
bench/RESULTS.md "Test tiers". Stop it with Ctrl-C or kill."""

from __future__ import annotations

import collections
import json
import os
import sys
import time

from by_process import stat_of  # this folder is sys.path[0] when run as a script
from test_cpu_plugin import FOLDER


def processes() -> dict[int, tuple[int, int, float]]:
    """{pid: (parent pid, start time, CPU seconds)} of every process now."""
    out = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        got = stat_of(name)
        if got is not None:
            out[int(name)] = got[:3]
    return out


def current_tests() -> dict[int, str]:
    out = {}
    for name in os.listdir(FOLDER) if os.path.isdir(FOLDER) else []:
        if name.endswith(".cur"):
            try:
                with open(f"{FOLDER}/{name}") as f:
                    out[int(name[:-4])] = f.read()
            except (OSError, ValueError):
                continue
    return out


def machine_times() -> tuple[int, int]:
    """(idle + iowait, all) jiffies of the machine so far."""
    with open("/proc/stat") as f:
        values = list(map(int, f.readline().split()[1:9]))
    return values[3] + values[4], sum(values)


def main(out_path: str) -> None:
    last = {(pid, start): cpu for pid, (_, start, cpu) in processes().items()}
    first_machine = machine_times()
    by_module: collections.Counter = collections.Counter()
    written = time.monotonic()
    while True:
        time.sleep(2)
        now, tests = processes(), current_tests()
        for pid, (_, start, cpu) in now.items():
            used = cpu - last.get((pid, start), 0.0)
            last[(pid, start)] = cpu
            if used <= 0:
                continue
            owner, up = "_other", pid
            for _ in range(40):
                if up in tests:
                    owner = tests[up].split("::")[0]
                    break
                up = now.get(up, (0,))[0]
                if up <= 1:
                    break
            by_module[owner] += used
        if time.monotonic() - written > 20:
            written = time.monotonic()
            idle, total = (a - b for a, b in zip(machine_times(), first_machine, strict=True))
            report = {
                "idle_frac": idle / total if total else None,
                "cpu_s": round(sum(by_module.values())),
                "by_module": {k: round(v, 1) for k, v in by_module.most_common()},
            }
            with open(out_path + ".tmp", "w") as f:
                json.dump(report, f, indent=1)
            os.replace(out_path + ".tmp", out_path)


if __name__ == "__main__":
    main(sys.argv[1])

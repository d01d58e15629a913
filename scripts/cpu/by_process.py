"""Dev tool: run a command and print the CPU seconds its process tree used, by process kind.

    python scripts/cpu/by_process.py .venv/bin/microcoder launch configs/tiny-cpu.toml --set ...

Every 0.5 s it reads /proc/<pid>/stat of every descendant of the command (Ray's raylet, GCS and
workers, vLLM's EngineCore, the sandboxes) and keeps each one's last user + system time; at the
end it sums them by kind (the actor class Ray names the process after, else the program). A
process that ends between two reads loses at most its last 0.5 s; one that lives less than 0.5 s
is not seen. The command's output goes to the file named by $CPU_LOG (default: by_process.log).
Used for bench/RESULTS.md "Test tiers" (what one tiny launch and one learning arm cost)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
KINDS = (
    "microcoder launch",  # first: its command line may hold "dashboard" in a --set
    "ray::Generator",
    "ray::Learner",
    "ray::Executor",
    "ray::BufferHost",
    "ray::IDLE",
    "ray::",
    "raylet",
    "gcs_server",
    "dashboard",
    "EngineCore",
    "bwrap",
)


def stat_of(pid: str) -> tuple[int, int, float, str] | None:
    """(parent pid, start time, CPU seconds, name) of process `pid` from /proc; None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / HZ
    return int(fields[1]), int(fields[19]), cpu, stat[stat.find("(") + 1 : stat.rfind(")")]


def processes() -> dict[tuple[int, int], tuple[int, float, str]]:
    """{(pid, start time): (parent pid, CPU seconds, command line)} of every process now."""
    out = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        got = stat_of(name)
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if got is not None:
            parent, start, cpu, comm = got
            out[(int(name), start)] = (parent, cpu, cmd or comm)
    return out


def kind(cmd: str) -> str:
    return next((k for k in KINDS if k in cmd), cmd.split(" ")[0].rsplit("/", 1)[-1])


def main(argv: list[str]) -> int:
    before = set(processes())
    t0 = time.monotonic()
    with open(os.environ.get("CPU_LOG", "by_process.log"), "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        seen: dict[tuple[int, int], tuple[float, str]] = {}
        while proc.poll() is None:
            now = processes()
            parent = {pid: v[0] for (pid, _), v in now.items()}
            for key, (_, cpu, cmd) in now.items():
                pid = key[0]
                for _ in range(40):  # up the tree to the command (or not)
                    if pid in (proc.pid, 0, 1):
                        break
                    pid = parent.get(pid, 0)
                if key not in before and pid == proc.pid:
                    seen[key] = (cpu, cmd)
            time.sleep(0.5)
    total: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for cpu, cmd in seen.values():
        total[kind(cmd)] += cpu
        count[kind(cmd)] += 1
    wall = time.monotonic() - t0
    print(f"exit {proc.returncode}, wall {wall:.0f} s, CPU {sum(total.values()):.0f} s")
    for name, cpu in total.most_common():
        print(f"{cpu:8.1f} s  {count[name]:4d} processes  {name}")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

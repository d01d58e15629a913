"""Per-actor log files in the run directory: an actor's stdout/stderr (its own prints and those of
vLLM, torch, the judge) go to `<run_dir>/logs/<name>.log` when the launcher set the folder; and
what names a replica's process (`replica_identity`)."""

from __future__ import annotations

import os
import re
import sys


def replica_identity(name: str) -> dict[str, object]:
    """The head of a pool replica's `stats()`: its name, pid and the node hosting it (as Ray
    reports it), so that a status line or an error can name the process."""
    import ray

    return {"name": name, "pid": os.getpid(), "node_ip": ray.util.get_node_ip_address()}


def redirect_to_run_dir(name: str) -> str | None:
    """Point fds 1 and 2 of this process at the actor's log file (appending); returns its path."""
    folder = os.environ.get("MICROCODER_ACTOR_LOG_DIR")
    if not folder:
        return None
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.log")
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    print(f"=== {name} (pid {os.getpid()}) ===", flush=True)
    return path


_ERROR_LINE = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*(?:Error|Exception|Exit))(:\s.*)?$")
"""An exception line, possibly behind a prefix (vLLM's "(EngineCore_DP0 pid=7) ERROR ... ")."""


def last_error_line(path: str | None, skip: tuple[str, ...] = (), tail_bytes: int = 1 << 16) -> str:
    """The last `XxxError: message` line in the last `tail_bytes` of the log at `path` whose
    type is not one of `skip` ("" when none, or no log): an engine's own root cause, which its
    EngineCore process printed to the actor's log before the actor saw only EngineDeadError."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail_bytes))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    for line in reversed(text.splitlines()):
        line = line.strip()
        match = _ERROR_LINE.search(line)
        if match and match.group(1).rsplit(".", 1)[-1] not in skip:
            return line[match.start() :][:500]
    return ""

"""Per-actor log files in the run directory: an actor's stdout/stderr (its own prints and those of
vLLM, torch, the judge) go to `<run_dir>/logs/<name>.log` when the launcher set the folder."""

from __future__ import annotations

import os
import sys


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

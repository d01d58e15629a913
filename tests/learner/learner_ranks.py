"""Test helper: run a worker script as several torch.distributed ranks (gloo, env rendezvous),
as the Ray learner actors join the group. Imported by the tests of this folder (conftest.py puts
the folder on sys.path; pytest's importlib mode does not)."""

from __future__ import annotations

import os
import subprocess
import sys

from microcoder.learner.distributed import free_port


def spawn_ranks(world: int, argv: list[str], timeout_s: float = 300.0) -> None:
    """Run `python *argv` as ranks 0..world-1 on a free port to completion; fail with every
    rank's log tail unless all exit 0."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "RANK": str(rank)}
        env |= {"WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "OMP_NUM_THREADS": "1"}
        procs.append(
            subprocess.Popen(
                [sys.executable, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        )
    logs = [p.communicate(timeout=timeout_s)[0].decode(errors="replace") for p in procs]
    codes = [p.returncode for p in procs]
    tails = "\n".join(
        f"--- rank {r} (exit {c}) ---\n{log[-2000:]}"
        for r, (c, log) in enumerate(zip(codes, logs, strict=True))
    )
    assert codes == [0] * world, tails

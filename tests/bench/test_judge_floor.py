"""bench/judge/floor.py: the no-isolation floor's pool ends even when one of its workers hangs
in a process with a Python SIGTERM handler (as a test process where Ray ran has one). A CI run
once waited forever there (the pool's exit sends SIGTERM, which such a worker never acted on)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from microcoder.bench.judge import floor
    from microcoder.bench.judge.workloads import overhead_workload

    signal.signal(signal.SIGTERM, lambda *a: None)  # a handler that does not exit
    MARK = sys.argv[1]
    quiet = floor._quiet

    def first_worker_hangs():
        try:
            os.close(os.open(MARK, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return quiet()
        while True:  # the other worker judges everything
            time.sleep(1)

    floor._quiet = first_worker_hangs
    ok, _ = floor.run_floor(overhead_workload(8), 2)
    print("done", len(ok), flush=True)
    """
)


def test_the_floor_pool_ends_though_a_worker_hangs_under_a_python_sigterm_handler(tmp_path):
    mark = tmp_path / "hung"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(mark)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "done 8" in out.stdout and mark.exists()

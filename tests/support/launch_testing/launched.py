"""Start a `microcoder launch` (or any command) for a test so that nothing outlives the test.

A launched run is a tree: the launcher, the Ray instance it starts (GCS, raylet, workers; Ray
ties them to the launcher with PR_SET_PDEATHSIG) and the actors. If the test process dies
without running its teardown (pytest SIGTERM'd or SIGKILLed, a CI job cancelled), a plain
`Popen` leaves that tree running forever under parent 1. Here every child:

- runs in its own process group (`start_new_session=True`), so one `killpg` reaches it all;
- asks the kernel to SIGTERM it when the thread that started it dies (`prctl(PR_SET_PDEATHSIG)`
  in `preexec_fn`, Linux); the launcher's SIGTERM handler checkpoints and shuts Ray down. Start
  children from the test's main thread: the signal follows the starting *thread*'s death;
- is stopped by `stop()` (SIGTERM to the group, then SIGKILL after `grace_s`), called by the
  `with` block, by the `launched` fixture (tests/launch/conftest.py), at interpreter exit, and
  when the LaunchedProcess is garbage-collected: keep a reference while the child should run
  (`LaunchedProcess(cmd).proc` alone stops it at once).

    with start_launch(["configs/tiny-cpu.toml", "--run-dir", str(d)], log=d / "out.log") as run:
        ...  # run.proc is the Popen; run.signal(signal.SIGINT) reaches the whole group
    res = run_launch(["--resume", str(d)], timeout=900)  # like subprocess.run(capture_output)
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
SIG_DFL = 0  # <signal.h>, for libc's signal(); the signal module's SIG_DFL is a Python enum


def die_with_parent(parent_pid: int) -> None:
    """In the child, before exec: SIGTERM me when my parent dies. If the parent already died
    between fork and here, the kernel will never send it, so do it now. SIGINT gets its default
    action back: a test started in the background (`pytest ... &` in a script, some CI runners)
    ignores SIGINT and would pass that on, so Ctrl-C (SIGINT) would never reach the launcher."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal(signal.SIGINT, SIG_DFL)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


def stop_group(pgid: int, proc: subprocess.Popen | None, grace_s: float) -> None:
    """SIGTERM the process group, wait up to `grace_s` for its leader (the launcher checkpoints
    and shuts Ray down meanwhile), then SIGKILL whatever of the group is left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:  # the whole group is gone already
        if proc is not None:
            proc.poll()
        return
    if proc is not None:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc is not None:
        proc.wait(timeout=30)  # SIGKILL is not refused; a leader still alive here is a bug


class LaunchedProcess:
    """A child started in its own process group that dies with the test (see the module doc)."""

    def __init__(self, cmd: list[str], log: Path | None = None, grace_s: float = 60.0, **kw):
        self.cmd = cmd
        self.grace_s = grace_s
        self.log_path = Path(log) if log is not None else None
        out = self.log_path.open("w") if self.log_path is not None else subprocess.DEVNULL
        parent = os.getpid()
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=kw.pop("stderr", subprocess.STDOUT),
                start_new_session=True,
                preexec_fn=lambda: die_with_parent(parent),
                **kw,
            )
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self.pid = self.proc.pid  # == the process group id (start_new_session)
        self._finalizer = weakref.finalize(self, stop_group, self.pid, self.proc, grace_s)

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout=timeout)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def signal(self, signum: int) -> None:
        """Send `signum` to the whole group (e.g. SIGINT, as Ctrl-C in a terminal does)."""
        os.killpg(self.pid, signum)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after the grace period; harmless when already stopped."""
        self._finalizer()

    def output(self) -> str:
        return self.log_path.read_text() if self.log_path is not None else ""

    def __enter__(self) -> LaunchedProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


SMALL_RUN = (
    "generator.max_inflight_prompts=4",
    "generator.max_response_tokens=32",
    "algorithm.group_size=4",
    "executor.workers=1",
    "monitor.dashboard_port=0",
    "model.warmstart=false",
    "algorithm.dynamic_filtering=false",  # every consumed group is trained on: B per step
    "eval.every=0",
)
"""`--set` values of a small launched run on the tiny model (tests/launch/test_chaos.py,
test_two_nodes.py): short replies, groups of 4, one sandbox worker, no dashboard, no warm start,
no filtering, no evaluation."""


def launch_cmd(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "microcoder", "launch", *args]


def start_launch(args: list[str], log: Path | None = None, **kw) -> LaunchedProcess:
    """`microcoder launch ARGS` in the background; output (stdout and stderr) to `log`."""
    return LaunchedProcess(launch_cmd(args), log=log, **kw)


def run_launch(args: list[str], timeout: float | None = None, **kw) -> subprocess.CompletedProcess:
    """`microcoder launch ARGS` to its end, as `subprocess.run(..., capture_output=True,
    text=True)` would return it; on timeout the group is stopped and TimeoutExpired raised."""
    with tempfile.TemporaryDirectory(prefix="mc-launch-out-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with err.open("w") as err_file:
            run = start_launch(args, log=out, stderr=err_file, **kw)
        with run:
            try:
                code = run.wait(timeout=timeout)
            except subprocess.TimeoutExpired as late:
                run.stop()
                output = (out.read_text(), err.read_text())
                raise subprocess.TimeoutExpired(run.cmd, timeout, *output) from late
        return subprocess.CompletedProcess(run.cmd, code, out.read_text(), err.read_text())


QUICK = [
    "model.warmstart=false",  # no warm-start training before the run
    "generator.enforce_eager=true",  # no torch.compile: the engine starts sooner
    "generator.max_response_tokens=16",
    "learner.max_filtered_batches=1",
    "learner.checkpoint_every=0",
    "executor.workers=1",
    "monitor.dashboard_port=0",  # a free port: runs side by side do not clash
]
"""The `--set`s of a quick tiny launch: no warm start, no compile, short responses, one
filtered batch before a step gives up, no checkpoints, one sandbox worker."""
SMALL_BATCH = [
    "learner.batch_size=8",
    "generator.max_inflight_prompts=8",
    "algorithm.group_size=2",
    "algorithm.dynamic_filtering=false",  # the random-weight model fails all: train on them
]
"""Small steps that train on every group (a random-weight model fails every problem)."""


def tiny_args(settings: list[str]):
    """The `microcoder launch` arguments of a tiny run with `--set` for each of `settings`, as a
    function of (run_dir, model_dir): configs/tiny-cpu.toml into `run_dir` on the model at
    `model_dir` (a batched module's launch: launch_testing.batch)."""

    def args(run_dir: Path, model_dir: Path) -> list[str]:
        sets = [a for s in [f'model.path="{model_dir}"', *settings] for a in ("--set", s)]
        return ["configs/tiny-cpu.toml", "--run-dir", str(run_dir), *sets]

    return args


def metrics_records(run_dir: Path, kind: str) -> list[dict]:
    """The records of `kind` ("step", "eval", ...) in `run_dir`/metrics.jsonl, in order."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def rollout_rows(run_dir: Path) -> list[dict]:
    """Every row of a run's rollout dump (RUN_DIR/rollouts/step-*.jsonl), step after step."""
    return [
        json.loads(line)
        for f in sorted((run_dir / "rollouts").glob("step-*.jsonl"))
        for line in f.read_text().splitlines()
    ]


def assert_finished(proc, run_dir: Path, steps: int) -> None:
    """The launch exited 0 (else its output's tails are the failure) and its last step record
    is step `steps`."""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert max(r["step"] for r in metrics_records(run_dir, "step")) == steps

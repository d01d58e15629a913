"""The launcher's supervisor thread and the control requests it answers.

Every ~2 s the `Supervisor` thread checks the buffer is alive (launch/run/buffer_watch.py: `BufferWatch`), restarts dead
replicas (returning their leases to the buffer), logs the errors live replicas report (a wave
that failed on a bad prompt) and applies `microcoder scale` requests (`apply_control`). It runs beside the training loop
(launch/run/training_loop.py), never inside it: the loop may be blocked waiting for a batch that only
a restarted generator can produce, so supervision must not wait for a step to end. The pools it
checks are launch/run/pools.py; the handles it works on are the `Run` of launch/run/cluster.py.

Control requests travel through the run directory (no extra ports, works wherever the files do):
`microcoder scale ...` calls `send_request`, which writes `control/req-<id>.json`; the
supervisor's `ControlInbox` picks requests up, `apply_control` applies them and the inbox writes
`control/res-<id>.json`, which the command waits for. Files are written atomically (write +
rename), so a reader never sees half a request. Both sides are here so the format lives in one
file.

A replica that keeps failing after its restarts (launch/run/pools.py `RestartBudget`: a vLLM engine
that dies again after every restart) stops the run too (`Run.stop_for_replica`: the training
loop raises `ReplicaFailed`, whose message names the engine's own error and the fix).
A dead buffer stops the run (`Run.stop_for`; the training loop raises `BufferDied` within a
second, launch/run/command.py names the checkpoint to resume from). It is not restarted from its
snapshot while the run goes on: the snapshot is written only with a checkpoint, so restoring it
under a learner and generators that ran on would replay the groups trained since, re-issue
prompts and strand the leases live replicas hold; the consistent restart is that checkpoint's
learner and buffer together, which is `microcoder launch --resume` (notes/issue-16.md, C).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from microcoder.launch.run.buffer_watch import BufferWatch

if TYPE_CHECKING:  # `microcoder scale` imports send_request from here: keep that import light
    from microcoder.launch.run.cluster import Run


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def send_request(
    run_dir: str | Path, action: dict[str, Any], timeout_s: float = 600.0
) -> dict[str, Any]:
    """Ask the live run in `run_dir` to do `action`; wait for and return its result."""
    folder = Path(run_dir) / "control"
    folder.mkdir(parents=True, exist_ok=True)
    rid = uuid.uuid4().hex[:12]
    _write_atomic(folder / f"req-{rid}.json", {**action, "time": time.time()})
    result = folder / f"res-{rid}.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result.exists():
            return json.loads(result.read_text())
        time.sleep(0.2)
    raise TimeoutError(
        f"the run in {run_dir} did not answer within {timeout_s:.0f} s: is it still running? "
        "(its supervisor applies requests every few seconds; `microcoder status` shows its state)"
    )


class ControlInbox:
    """The launcher's side: requests waiting in `run_dir/control`, oldest first."""

    def __init__(self, run_dir: str | Path):
        self.folder = Path(run_dir) / "control"
        self.folder.mkdir(parents=True, exist_ok=True)

    def poll(self) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for path in sorted(self.folder.glob("req-*.json"), key=lambda p: p.stat().st_mtime):
            rid = path.stem[4:]
            try:
                action = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as err:
                action = {"invalid": str(err)}
            path.unlink(missing_ok=True)
            out.append((rid, action))
        return out

    def reply(self, rid: str, result: dict[str, Any]) -> None:
        _write_atomic(self.folder / f"res-{rid}.json", result)


def apply_control(run: Run, inbox: ControlInbox) -> None:
    """Apply the `microcoder scale` requests waiting in the run directory, replying to each."""
    for rid, action in inbox.poll():
        pool = {"generators": run.generators, "executors": run.executors}.get(action.get("pool"))
        if action.get("action") != "scale" or pool is None or int(action.get("n", 0)) < 1:
            inbox.reply(rid, {"ok": False, "error": f"cannot do {action}"})
            continue
        before = len(pool)
        run.log(f"scaling {action['pool']}: {before} -> {action['n']}")
        try:
            hook = run.prepare_generator if pool is run.generators else None
            added, removed = pool.scale_to(int(action["n"]), before_loop=hook)
        except Exception as err:
            inbox.reply(rid, {"ok": False, "error": str(err)})
            continue
        run.metrics.log("event", event=f"scaled {action['pool']} {before} -> {len(pool)}")
        inbox.reply(
            rid,
            {"ok": True, "before": before, "after": len(pool), "added": added, "removed": removed},
        )


class Supervisor:
    """The thread: `start()`, `stop()`; `tick()` is one round (also callable on its own)."""

    def __init__(self, run: Run, period_s: float = 2.0, errors_every: int = 3):
        self.run = run
        self.period_s = period_s
        self.errors_every = errors_every
        self._ticks = 0
        self.watch = BufferWatch.for_run(run)
        self.inbox = ControlInbox(run.run_dir)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="supervisor", daemon=True)

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def tick(self) -> None:
        """One round: check the buffer, supervise both pools, then apply control requests.
        A dead buffer stops the run; while it does not answer, no replica is restarted (its
        leases could not be returned)."""
        run = self.run
        self._ticks += 1
        if run.fatal:
            return
        why = self.watch.check()
        if why:
            run.stop_for(why)
            return
        if self.watch.failing:
            return
        for pool in (run.generators, run.executors):
            hook = run.prepare_generator if pool is run.generators else None
            for event in pool.check(before_loop=hook):
                run.log(event)
                run.metrics.log("event", event=event, step=run.learners.version)
            if getattr(pool, "fatal", ""):  # a replica kept failing after its restarts
                run.stop_for_replica(pool.fatal)
                return
            if self._ticks % self.errors_every == 0:  # errors replicas survived (a failed wave)
                for error in pool.report_errors(pool.stats()):
                    run.log(error)
                    run.metrics.log("event", event=error, step=run.learners.version)
        apply_control(run, self.inbox)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.tick()
            except Exception as err:  # keep supervising; say what went wrong
                self.run.log(f"supervisor: {type(err).__name__}: {err}")

"""The run's checkpoints off the training loop (issue 49): at most one save in flight.

`AsyncCheckpoints.start(step)` takes the buffer's snapshot, has every learner rank snapshot its
state to host memory (learner/checkpoint.py: start_save) and returns; the ranks' background
writers write `checkpoints/step_N.partial`. `poll()` (the training loop, once a step) and
`wait()` (before the next save, at the end of the run, on Ctrl-C) find it done, rename it to
`step_N`, write COMPLETE last and run retention. A save that comes due while the last one still
writes waits for it first: the wait is logged and recorded as `checkpoint_wait_s` in
metrics.jsonl (an "event" record, event = "checkpoint"). A launcher killed mid-save leaves a
`.partial` folder that resume ignores and the next retention deletes.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from microcoder.launch.run.checkpoint_retention import retain
from microcoder.learner.checkpoint import partial_path, publish_complete

if TYPE_CHECKING:
    from microcoder.launch.run.cluster import Run

POLL_S = 0.2
"""How often `wait` asks the ranks whether their writers are done."""


@dataclass
class InFlight:
    """The save being written: its step, folders, when it started and the evals it waits on."""

    step: int
    partial: Path
    final: Path
    started: float
    pending: Collection[int] = field(default_factory=tuple)


class AsyncCheckpoints:
    """The one save in flight of a run (`Run.checkpoint` starts it, the loop finishes it)."""

    def __init__(self, run: Run):
        self.run = run
        self.in_flight: InFlight | None = None

    def start(self, step: int, final: Path, pending: Collection[int] = ()) -> Path:
        """Wait for the save in flight, then snapshot the run at `step` and return `final`
        (complete once `poll` or `wait` found the writers done)."""
        if self.in_flight is not None and self.in_flight.step == step:
            return final
        waited = self.wait()
        run = self.run
        partial = partial_path(final)
        if partial.exists():  # a save of this step killed earlier
            shutil.rmtree(partial)
        t0 = time.perf_counter()
        run.client.snapshot(str(partial / "buffer.snapshot"))
        run.learners.start_save(str(partial))
        if run.controller is not None:
            (partial / "temperature.json").write_text(json.dumps(run.controller.state_dict()))
        snapshot_s = time.perf_counter() - t0
        self.in_flight = InFlight(step, partial, final, time.perf_counter(), pending)
        run.metrics.log(
            "event",
            event="checkpoint",
            step=step,
            checkpoint_wait_s=waited,
            checkpoint_snapshot_s=snapshot_s,
        )
        run.log(
            f"checkpoint step {step}: snapshot in {snapshot_s:.1f} s, writing {partial.name} in "
            "the background"
        )
        return final

    def poll(self) -> Path | None:
        """The checkpoint completed now, if the writers are done (never blocks on them)."""
        if self.in_flight is None or not self.run.learners.save_done():
            return None
        return self.complete()

    def wait(self) -> float:
        """Block until no save is in flight (deadline learner.step_timeout_s); returns the
        seconds waited, logged when the loop had to wait."""
        if self.in_flight is None:
            return 0.0
        t0 = time.perf_counter()
        limit = self.run.cfg.learner.step_timeout_s
        while not self.run.learners.save_done():
            if time.perf_counter() - t0 > limit:
                raise TimeoutError(
                    f"the checkpoint writers of step {self.in_flight.step} still write after "
                    f"{limit:.0f} s (learner.step_timeout_s): the filesystem under "
                    f"{self.in_flight.partial.parent} is too slow or stuck; raise "
                    "learner.checkpoint_every or learner.step_timeout_s"
                )
            time.sleep(POLL_S)
        waited = time.perf_counter() - t0
        step = self.in_flight.step
        self.complete()
        self.run.log(f"waited {waited:.1f} s for the checkpoint of step {step} to be written")
        return waited

    def complete(self) -> Path:
        """Rename, COMPLETE, retention (learner.keep_checkpoints / keep_best)."""
        job, self.in_flight = self.in_flight, None
        run = self.run
        publish_complete(job.partial, job.final, job.step)
        write_s = time.perf_counter() - job.started
        run.log(f"checkpoint step {job.step} -> {job.final} (written in {write_s:.1f} s)")
        learner = run.cfg.learner
        retain(
            job.final.parent,
            learner.keep_checkpoints,
            learner.keep_best,
            run.metrics.path,
            job.pending,
            run.log,
        )
        return job.final

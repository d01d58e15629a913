"""The run's checkpoints on the driver: written off the training loop (`AsyncCheckpoints`),
and which to keep (learner.keep_checkpoints): the newest N complete ones, and with
learner.keep_best the one with the best held-out pass rate.

Saving (issue 49), at most one save in flight: `AsyncCheckpoints.start(step)` takes the
buffer's snapshot, has every learner rank snapshot its state to host memory
(learner/checkpoint.py: start_save) and returns; the ranks' background writers write `checkpoints/step_N.partial`. `poll()` (the training loop, once a step) and
`wait()` (before the next save, at the end of the run, on Ctrl-C) find it done, rename it to
`step_N`, write COMPLETE last and run retention. A save that comes due while the last one still
writes waits for it first: the wait is logged and recorded as `checkpoint_wait_s` in
metrics.jsonl (an "event" record, event = "checkpoint"). A launcher killed mid-save leaves a
`.partial` folder that resume ignores and the next retention deletes.

Retention (`retain`): called right after a checkpoint is COMPLETE (`AsyncCheckpoints.complete`),
so the newest resumable state always exists before an older one is deleted.

With the held-out eval beside training (launch/run/eval_beside.py) an eval's record lands some
steps after the checkpoint of its step: the learner goes on stepping (and checkpointing) while
it runs. Until it lands, that checkpoint's score is unknown, so the training loop names the
step of the eval in flight (`pending`) and it is kept; the next retention after the record
landed decides by its score. Without this, learner.keep_checkpoints = N checkpoints written
during the eval would delete the evaluated one before keep_best could see its score.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from microcoder.launch.monitor.metrics_log import read_metrics
from microcoder.learner.checkpoint import PARTIAL_SUFFIX, partial_path, publish_complete

if TYPE_CHECKING:
    from microcoder.launch.run.cluster import Run


def _step(path: Path) -> int:
    return int(path.name.removesuffix(PARTIAL_SUFFIX).split("_")[1])


def prune_checkpoints(
    checkpoints_dir: Path,
    keep: int,
    scores: dict[int, float] | None = None,
    pending: Collection[int] = (),
) -> list[Path]:
    """Delete every `step_N` folder of `checkpoints_dir` but the `keep` newest COMPLETE ones
    (0 = keep all); an incomplete folder (a save that died) older than the newest complete one
    goes too. With `scores` ({step: held-out pass rate}), the complete checkpoint with the
    highest score (the newest of equals) is kept as well, and so are the complete ones at a
    `pending` step (an eval of that step still running: its score is not known yet). Returns
    what was deleted, oldest first. A `step_N.partial` folder (a save killed before it was
    complete, learner/checkpoint.py) always goes, first: retention runs only while no save is
    in flight."""
    partial = sorted(checkpoints_dir.glob("step_*" + PARTIAL_SUFFIX), key=_step)
    for p in partial:
        shutil.rmtree(p)
    if keep <= 0:
        return partial
    folders = sorted((p for p in checkpoints_dir.glob("step_*") if p.name[5:].isdigit()), key=_step)
    complete = [p for p in folders if (p / "COMPLETE").exists()]
    if not complete:
        return partial
    kept = set(complete[-keep:])
    scored = [p for p in complete if _step(p) in (scores or {})]
    if scored:
        kept.add(max(scored, key=lambda p: (scores[_step(p)], _step(p))))
    if scores is not None:
        kept.update(p for p in complete if _step(p) in pending)
    newest = _step(complete[-1])
    doomed = [p for p in folders if p not in kept and _step(p) < newest]
    for p in doomed:
        (p / "COMPLETE").unlink(missing_ok=True)  # never a half-deleted "complete" checkpoint
        shutil.rmtree(p)
    return partial + doomed


def heldout_scores(metrics_path: Path) -> dict[int, float]:
    """{step: held-out sampled pass@1} of the run's `eval` records (metrics.jsonl)."""

    if not metrics_path.is_file():
        return {}
    return {
        int(r["step"]): float(r["heldout_pass_rate"])
        for r in read_metrics(metrics_path, "eval")
        if r.get("heldout_pass_rate") is not None
    }


def retain(
    checkpoints_dir: Path,
    keep: int,
    keep_best: bool,
    metrics_path: Path,
    pending: Collection[int] = (),
    log: Callable[[str], None] = print,
) -> list[Path]:
    """The run's retention after a checkpoint: learner.keep_checkpoints = `keep`, and with
    learner.keep_best the best evaluated checkpoint and those whose eval is `pending`; each
    deletion logged."""
    scores = heldout_scores(metrics_path) if keep_best else None
    doomed = prune_checkpoints(checkpoints_dir, keep, scores, pending)
    for old in doomed:
        log(f"deleted {old.name} (learner.keep_checkpoints = {keep})")
    return doomed


POLL_S = 0.2
"""How often `wait` asks the ranks whether their writers are done."""
WAIT_LOG_S = 0.1
"""A wait for the save in flight at least this long is logged (every wait is in the record)."""


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
        self.poll()
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
        if waited >= WAIT_LOG_S:
            self.run.log(f"waited {waited:.1f} s for the checkpoint of step {step} to be written")
        return waited

    def complete(self) -> Path:
        """Rename, COMPLETE, retention (learner.keep_checkpoints / keep_best)."""
        job, self.in_flight = self.in_flight, None
        run = self.run
        publish_complete(job.partial, job.final, job.step)
        write_s = time.perf_counter() - job.started
        run.log(
            f"checkpoint step {job.step} -> {job.final} (found written {write_s:.1f} s after "
            "its snapshot)"
        )
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

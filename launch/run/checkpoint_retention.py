"""Which checkpoints of a run to keep (learner.keep_checkpoints): the newest N complete ones,
and with learner.keep_best the one with the best held-out pass rate.

Called by the driver right after a checkpoint is COMPLETE (launch/run/cluster.py: Run.checkpoint),
so the newest resumable state always exists before an older one is deleted.

With the held-out eval beside training (launch/run/eval_beside.py) an eval's record lands some
steps after the checkpoint of its step: the learner goes on stepping (and checkpointing) while
it runs. Until it lands, that checkpoint's score is unknown, so the training loop names the
step of the eval in flight (`pending`) and it is kept; the next retention after the record
landed decides by its score. Without this, learner.keep_checkpoints = N checkpoints written
during the eval would delete the evaluated one before keep_best could see its score.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection
from pathlib import Path

from microcoder.launch.monitor.metrics_log import read_metrics
from microcoder.learner.checkpoint import PARTIAL_SUFFIX


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

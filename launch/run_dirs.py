"""Which run a command means when it is not told: `newest_run`, the one rule that `microcoder
status` and `microcoder scale` share (so both pick the same run).

A run directory is a folder under `runs/` (or another root) holding the launcher's
`config.toml` or `metrics.jsonl`: launch/run/command.py writes config.toml first, and
metrics.jsonl as soon as the cluster handle (launch/run/cluster.py) opens its log, then on every
record. The newest run is the one whose newest of those two files was written last, so a run
that just started (config.toml alone) counts, and a long run still training beats one started
later that has stopped. Model folders and other directories under `runs/` hold neither file.

`latest_checkpoint` is the checkpoint a run resumes from: its newest complete
`checkpoints/step_N` (the learner writes COMPLETE last), what `launch --resume` loads and what
`microcoder status` names for a stopped run.
"""

from __future__ import annotations

from pathlib import Path

RUN_FILES = ("config.toml", "metrics.jsonl")
"""The files that make a folder a run directory; the newest write to either dates the run."""


def last_written(run_dir: Path) -> float | None:
    """When the run last wrote one of RUN_FILES (unix seconds); None if it holds neither."""
    times = [(run_dir / name).stat().st_mtime for name in RUN_FILES if (run_dir / name).exists()]
    return max(times, default=None)


def newest_run(root: str | Path = "runs") -> Path | None:
    """The run directory under `root` written to last, or None when there is none."""
    root = Path(root)
    if not root.is_dir():
        return None
    runs = [(t, p) for p in root.iterdir() if p.is_dir() and (t := last_written(p)) is not None]
    return max(runs, key=lambda tp: tp[0])[1] if runs else None


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete `checkpoints/step_N` of a run directory."""
    steps = [p for p in (run_dir / "checkpoints").glob("step_*") if (p / "COMPLETE").exists()]
    return max(steps, key=lambda p: int(p.name.split("_")[1]), default=None)

"""Metrics export: the MetricsLogger sinks that send a run's records to TensorBoard event files
and to Weights & Biases (launch/monitor/session.py attaches them; launch/monitor/metrics_log.py writes the
records; the Prometheus page, which is scraped rather than pushed, is launch/monitor/prometheus.py).

Both receive every record; "step" records are logged at global step `step` under tags made from
the dotted keys (`buffer.depths.scored` -> `buffer/depths/scored`, `verdict_counts/AC`), "eval"
records under `eval/`; the group pass-rate histogram list as one tag per bin
(`group_pass_hist/(0%,25%]`, learner/verdict_stats.py: GROUP_PASS_BINS).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from microcoder.launch.monitor.dashboard_store import flatten

WANDB_MISSING = (
    "monitor.wandb_project is set but the `wandb` package is not installed: run "
    "`.venv/bin/pip install wandb` (and `wandb login`), or clear monitor.wandb_project"
)
TB_MISSING = (
    "monitor.tensorboard is on but the `tensorboard` package is not installed: run "
    "`.venv/bin/pip install tensorboard`, or set monitor.tensorboard=false"
)


def scalars(record: dict[str, Any]) -> tuple[int, dict[str, float]] | None:
    """(global step, {tag: value}) of a step or eval record; None for other kinds or no step."""
    kind = record.get("kind")
    step = record.get("step")
    if kind not in ("step", "eval") or not isinstance(step, (int, float)):
        return None
    body = {k: v for k, v in record.items() if k not in ("kind", "time", "step")}
    if isinstance(body.get("group_pass_hist"), list):
        from microcoder.learner.verdict_stats import GROUP_PASS_BINS

        body["group_pass_hist"] = dict(zip(GROUP_PASS_BINS, body["group_pass_hist"], strict=False))
    prefix = "eval." if kind == "eval" else ""
    return int(step), {k.replace(".", "/"): v for k, v in flatten(body, prefix).items()}


def require_wandb():
    """The wandb module, or a RuntimeError that says how to install it."""
    try:
        import wandb
    except ImportError as err:
        raise RuntimeError(WANDB_MISSING) from err
    return wandb


def require_tensorboard():
    """torch's SummaryWriter, or a RuntimeError that says how to install tensorboard."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:
        raise RuntimeError(TB_MISSING) from err
    return SummaryWriter


class TensorBoardSink:
    """Writes event files under `log_dir` (view: `tensorboard --logdir RUN_DIR/tensorboard`)."""

    def __init__(self, log_dir: str | Path):
        self.writer = require_tensorboard()(log_dir=str(log_dir))

    def __call__(self, record: dict[str, Any]) -> None:
        got = scalars(record)
        if got is None:
            return
        step, values = got
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step, walltime=record.get("time"))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """Logs to a W&B run; a resumed launch continues the same W&B run (id kept in the run dir)."""

    def __init__(self, project: str, run_dir: str | Path, config: dict[str, Any] | None = None):
        self.wandb = require_wandb()
        run_dir = Path(run_dir)
        id_file = run_dir / "wandb.json"
        # Our own id (8 lowercase hex digits, a valid W&B run id): wandb has no public id maker
        # (0.31 dropped wandb.util.generate_id).
        run_id = json.loads(id_file.read_text())["id"] if id_file.exists() else secrets.token_hex(4)
        id_file.write_text(json.dumps({"id": run_id, "project": project}))
        self.run = self.wandb.init(
            project=project,
            name=run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config or {},
        )

    def __call__(self, record: dict[str, Any]) -> None:
        got = scalars(record)
        if got is not None:
            step, values = got
            self.run.log(values, step=step)

    def close(self) -> None:
        """Finish the run, then stop wandb's service: `finish` alone can return before wandb's
        core has written the run file (seen offline with wandb 0.31), and the run's end must
        leave it complete on disk for `wandb sync`."""
        self.run.finish()
        self.wandb.teardown()

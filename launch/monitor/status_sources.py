"""Where a run's status comes from: the live launcher (pools, store) or the run directory's files.

status_live(run, store, url)  -> dict     the dashboard's /api/status (inside the launcher)
status_from_files(run_dir)    -> dict     a stopped or finished run (metrics.jsonl, logs)

The default run of `microcoder status` (and `scale`) is launch/run_dirs.py `newest_run`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from microcoder.launch.monitor.memory_view import collect_memory, memory_section
from microcoder.launch.monitor.metrics_log import read_metrics
from microcoder.launch.monitor.status_view import build_status
from microcoder.launch.run_dirs import latest_checkpoint

ERROR_WORDS = re.compile(r"died|error|fail|could not|violat|exception|traceback|stale groups", re.I)
"""Launcher log lines and events that `last errors` shows."""


def error_lines(
    events: list[dict[str, Any]], log_lines: list[str] = (), last: int = 10
) -> list[str]:
    """Events and launcher log lines that report a failure, oldest first, at most `last`."""
    out = []
    for ev in events:
        text = str(ev.get("event", ""))
        if ERROR_WORDS.search(text):
            out.append(f"step {ev['step']}: {text}" if "step" in ev else text)
    out += [line for line in log_lines if ERROR_WORDS.search(line)]
    return out[-last:]


def _read_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.toml"
    try:
        return tomllib.loads(path.read_text()) if path.exists() else {}
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _state(step: int, max_steps: int | None, run_dir: Path) -> str:
    if max_steps and step >= max_steps:
        return "finished"
    newest = latest_checkpoint(run_dir)
    if newest is not None:
        last = int(newest.name.split("_")[1])
        return f"stopped (resume from checkpoint step {last}: microcoder launch --resume {run_dir})"
    return "stopped"


def status_from_files(run_dir: str | Path) -> dict[str, Any]:
    """Status of a run that is not serving: the newest records of its metrics.jsonl."""
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.jsonl"
    records = read_metrics(metrics) if metrics.exists() else []
    steps = [r for r in records if r.get("kind") == "step"]
    evals = [r for r in records if r.get("kind") == "eval"]
    events = [r for r in records if r.get("kind") == "event"]
    log = run_dir / "launcher.log"
    log_lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    cfg = _read_config(run_dir)
    max_steps = cfg.get("max_steps")
    latest = steps[-1] if steps else {}
    meta = {
        "run": run_dir.name,
        "run_dir": str(run_dir.resolve()),
        "state": _state(int(latest.get("step", 0)), max_steps, run_dir),
        "source": "files",
        "max_steps": max_steps,
        "started": records[0]["time"] if records else None,
        "world_size": (cfg.get("learner") or {}).get("world_size", 1),
        "eval_generators": (cfg.get("eval") or {}).get("generators", 0),
    }
    return build_status(
        latest, evals[-1] if evals else None, error_lines(events, log_lines), None, meta
    )


def pool_replicas(pool) -> list[dict[str, Any]]:
    """Per-replica stats of a launch.pools.Pool (Ray calls; safe from a non-training thread)."""
    if pool is None:
        return []
    for _ in range(3):  # the training thread may add or remove replicas meanwhile
        try:
            return pool.stats()
        except RuntimeError:
            continue
    return [{"name": name, "error": "stats unavailable"} for name in list(pool.replicas)]


def status_live(run, store, url: str = "", state: str = "running") -> dict[str, Any]:
    """Status of the run this launcher drives (the dashboard's /api/status)."""
    eval_pool = getattr(run, "eval_generators", None)  # eval.generators > 0
    replicas = {
        "generator": pool_replicas(run.generators),
        "executor": pool_replicas(run.executors),
        "eval-generator": pool_replicas(eval_pool),
    }
    pools = (run.generators, run.executors, eval_pool)
    pool_errors = [e for p in pools if p is not None for e in p.errors]
    latest_eval = next((r for r in reversed(store.raw) if r.get("kind") == "eval"), None)
    cfg = run.cfg
    meta = {
        "run": Path(run.run_dir).name,
        "run_dir": str(Path(run.run_dir).resolve()),
        "state": state,
        "source": "live",
        "max_steps": cfg.max_steps,
        "started": run.start_time,
        "dashboard": url,
        "world_size": cfg.learner.world_size,
        "buffer_address": run.buffer_address,
        "weight_channel_address": run.weight_channel_address,
        "eval_generators": cfg.eval.generators,
        "eval_activity": dict(getattr(run, "eval_activity", None) or {}),
    }
    errors = error_lines(store.events(50)) + pool_errors
    memory = memory_section(collect_memory(run))
    return build_status(store.latest_step, latest_eval, errors, replicas, meta, memory)

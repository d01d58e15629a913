"""A launched run's monitoring, started and stopped as one: the live dashboard (+ Prometheus
/metrics), TensorBoard, W&B.

The launcher calls, after `run.bring_up(...)`:

    monitor = start_monitoring(run)      # prints the dashboard URL, writes run_dir/dashboard.json
    ...
    monitor.stop()                       # before run.shutdown()

`check_exports(cfg)` fails fast (before Ray starts) when a configured exporter is not installed.
This file only wires things to the run's logger and starts the server; the records themselves
are written by launch/monitor/metrics_log.py, the TensorBoard/W&B sinks are launch/monitor/metrics_export.py,
the dashboard is launch/monitor/dashboard_server.py over launch/monitor/dashboard_store.py, and the /metrics
page is launch/monitor/prometheus.py.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from microcoder.launch.monitor.dashboard_server import DashboardServer
from microcoder.launch.monitor.dashboard_store import MetricsStore
from microcoder.launch.monitor.metrics_export import (
    TensorBoardSink,
    WandbSink,
    require_tensorboard,
    require_wandb,
)
from microcoder.launch.monitor.status_sources import status_live

DASHBOARD_FILE = "dashboard.json"
"""In the run directory while the launcher serves: {"url", "pid", "started"} (read by `status`)."""


def check_exports(cfg) -> None:
    """Raise RuntimeError (with the install command) if TensorBoard or W&B is on but missing."""

    if cfg.monitor.tensorboard:
        require_tensorboard()
    if cfg.monitor.wandb_project:
        require_wandb()


@dataclass
class MonitorHandle:
    """What start_monitoring returns: the dashboard `url` and `stop()`."""

    url: str
    store: MetricsStore
    server: DashboardServer | None = None
    sinks: list[Any] = field(default_factory=list)
    logger: Any = None
    run_dir: Path | None = None
    state: dict[str, str] = field(default_factory=lambda: {"state": "starting"})

    def set_state(self, state: str) -> None:
        """What /api/status reports as the run's state (running, stopping, finished...)."""
        self.state["state"] = state

    def stop(self) -> None:
        """Detach the sinks, close the exporters, stop the server, remove dashboard.json."""
        for sink in self.sinks:
            if self.logger is not None and sink in self.logger.sinks:
                self.logger.sinks.remove(sink)
            close = getattr(sink, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as err:
                    print(f"monitoring: closing {type(sink).__name__} failed: {err}")
        self.sinks.clear()
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.run_dir is not None:
            (self.run_dir / DASHBOARD_FILE).unlink(missing_ok=True)


def start_monitoring(run, serve: bool = True) -> MonitorHandle:
    """Register the export sinks on `run.metrics` and start the dashboard server."""

    cfg = run.cfg
    run_dir = Path(run.run_dir)
    logger = run.metrics
    store = MetricsStore()
    store.load(logger.path)  # a resumed run: earlier records are already in the file
    handle = MonitorHandle(url="", store=store, logger=logger, run_dir=run_dir)
    sinks: list[Any] = [store.add]
    if cfg.monitor.tensorboard:
        sinks.append(TensorBoardSink(run_dir / "tensorboard"))
    if cfg.monitor.wandb_project:
        sinks.append(WandbSink(cfg.monitor.wandb_project, run_dir, cfg.model_dump(mode="json")))
    handle.sinks = sinks
    logger.sinks.extend(sinks)
    if serve:
        server = DashboardServer(
            store,
            lambda: status_live(run, store, handle.url, handle.state["state"]),
            cfg.monitor.dashboard_host,
            cfg.monitor.dashboard_port,
            title=run_dir.name,
        ).start()
        handle.server = server
        handle.url = server.url
        info = {"url": server.url, "pid": os.getpid(), "started": time.time()}
        (run_dir / DASHBOARD_FILE).write_text(json.dumps(info))
        run.log(f"dashboard: {server.url}   (Prometheus: {server.url}metrics)")
    return handle

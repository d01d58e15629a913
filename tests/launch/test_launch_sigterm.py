"""SIGTERM to `microcoder launch` while Ray is up checkpoints, like Ctrl-C (exit 130). `ray.init`
installs its own SIGTERM handler in the driver (a bare `sys.exit(15)`: no checkpoint); the
launcher puts its own back after starting Ray. No Ray here: Run.start_ray is replaced by the
same replacement ray.init makes, and the SIGTERM arrives during bring-up."""

from __future__ import annotations

import os
import signal
import sys
import time
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace

from microcoder.launch.config import load_config

TINY = Path(__file__).parents[2] / "configs" / "tiny-cpu.toml"


def test_sigterm_after_ray_started_checkpoints_and_exits_130(monkeypatch, tmp_path):
    from microcoder.launch.run import cluster, command
    from microcoder.launch.run.command import launch

    calls = []

    def start_ray(run, plan_cpus, check_plan=True):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # as ray.init does

    def bring_up(run, model_path):
        run.learners = object()  # a learner group exists: there is something to checkpoint
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs at the next bytecode; never reached when it raised

    monkeypatch.setattr(cluster.Run, "start_ray", start_ray)
    monkeypatch.setattr(cluster.Run, "bring_up", bring_up)
    monkeypatch.setattr(cluster.Run, "checkpoint", lambda run: calls.append("checkpoint"))
    monkeypatch.setattr(cluster.Run, "shutdown", lambda run: calls.append("shutdown"))
    monkeypatch.setattr(command, "ensure_model", lambda m, c: tmp_path / "model")
    stub = SimpleNamespace(stop=lambda: None, set_state=lambda s: None)
    monkeypatch.setattr(command, "start_monitoring", lambda run: stub)
    before = signal.getsignal(signal.SIGTERM)
    cfg = load_config(TINY, [f'model.path="{tmp_path}/model"'])
    code = launch(cfg, Namespace(resume=None, run_dir=str(tmp_path / "run")))
    assert (code, calls) == (130, ["checkpoint", "shutdown"])
    assert signal.getsignal(signal.SIGTERM) == before  # the launcher restores the caller's

"""The actors of a standalone evaluation (`microcoder eval`, `microcoder bench eval`): Ray started
the way a run starts it (launch/run/cluster.py `Run.start_ray`), G generators with no buffer and no
weight publisher, E executors with no buffer and no run data. A training run's periodic eval
uses the run's own pools instead. In launch/ because it brings up Ray from the root config."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from microcoder.actors.remote import executor_cls, generator_cls
from microcoder.device import resolve_device
from microcoder.evaluation.settings import EvalError
from microcoder.launch.config import Config
from microcoder.launch.run.actor_settings import generator_settings
from microcoder.launch.run.cluster import Run
from microcoder.launch.run.placement import release, replica_options


class EvalCluster:
    """Start with `start(...)`, hand `generators` / `executors` to `evaluate`, then `close()`."""

    def __init__(self, cfg: Config, out_dir: Path, address: str = "local"):
        """`cfg.cluster.device` is resolved here (`auto` -> cuda or cpu); on cuda each generator
        gets one GPU unless `generator.gpus_per_engine` says otherwise."""

        cfg.cluster.device = resolve_device(cfg.cluster.device)
        if cfg.cluster.device == "cuda" and not cfg.generator.gpus_per_engine:
            cfg.generator.gpus_per_engine = 1.0
        self.cfg = cfg
        self.out_dir = out_dir
        self.address = address
        self.generators: dict[str, Any] = {}
        self.executors: dict[str, Any] = {}
        self.started_ray = False

    def start(
        self,
        model_path: str | None,
        n_generators: int,
        n_executors: int,
        log=print,
        ready_timeout_s: float = 900.0,
    ) -> None:
        import ray

        cfg = self.cfg
        gens = n_generators if model_path else 0
        cpus = gens * cfg.generator.cpus_per_engine + n_executors * cfg.executor.cpus_per_executor
        if not ray.is_initialized():
            # Run.start_ray reads only cfg, run_dir and address: the same Ray a run gets, with
            # actor logs in <out>/logs/ (no training plan to check: no learner, no buffer).
            Run.start_ray(
                SimpleNamespace(cfg=cfg, run_dir=self.out_dir, address=self.address, log=log),
                cpus,
                check_plan=False,
            )
            self.started_ray = True
        ex_cls = executor_cls(cfg.executor)
        for i in range(n_executors):
            name = f"executor-{i}"
            # no buffer, no run data; named as a run's replicas are, so that a multi-turn
            # environment's sandbox (actors/environments/executor_sandbox.py) finds them
            self.executors[name] = ex_cls.options(name=f"mc-{name}").remote(name, cfg.executor)
        if gens:
            gen_cls = generator_cls(cfg.generator)
            g = cfg.generator
            for i in range(gens):
                name = f"generator-{i}"
                opts = replica_options(
                    g.cpus_per_engine, g.gpus_per_engine, cfg.cluster.device, name
                )
                self.generators[name] = gen_cls.options(**opts).remote(
                    name, generator_settings(cfg, i), model_path, None
                )
            log(
                f"starting {gens} generator(s) and {n_executors} executor(s) "
                "(a vLLM engine takes a while to start) ..."
            )
        t0 = time.monotonic()
        for name, handle in {**self.executors, **self.generators}.items():
            left = max(1.0, ready_timeout_s - (time.monotonic() - t0))
            try:
                ray.get(handle.ready.remote(), timeout=left)
            except Exception as err:  # named, with the remedy
                lines = [ln for ln in str(err).splitlines() if ln.strip()]
                raise EvalError(
                    f"{name} did not start: {lines[-1] if lines else type(err).__name__}. See "
                    f"{self.out_dir / 'logs' / (name + '.log')}"
                    + (
                        "; is the model folder complete and do --max-tokens + the prompt limit fit "
                        "its context?"
                        if name.startswith("generator")
                        else "; does the sandbox work here (`microcoder judge`)?"
                    )
                ) from err
        log(f"actors ready in {time.monotonic() - t0:.1f} s")

    def evaluate(self, problems, settings, out_dir: Path | None, texts: dict[str, str], **kwargs):
        """`evaluation.engine.evaluate` on these actors, each problem's prompt its rendered text
        in `texts` (by problem id); `kwargs` (progress, generations, context) go through."""
        from microcoder.evaluation.engine import evaluate

        return evaluate(
            problems,
            settings,
            self.generators,
            self.executors,
            out_dir,
            renderer_text=lambda p: texts[p.id],
            **kwargs,
        )

    def close(self) -> None:
        import ray

        if not ray.is_initialized():
            return
        calls = [h.shutdown.remote() for h in {**self.generators, **self.executors}.values()]
        try:
            ray.get(calls, timeout=60)
        except Exception:  # best effort: the process is going away anyway
            pass
        for h in {**self.generators, **self.executors}.values():
            try:
                ray.kill(h)
            except Exception:
                pass

        release(*self.generators)  # their placement groups (GPU runs; none on the CPU)
        self.generators = {}
        self.executors = {}
        if self.started_ray:
            ray.shutdown()

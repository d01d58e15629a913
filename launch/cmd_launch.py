"""`microcoder launch CONFIG [--set k=v ...] [--address ...] [--run-dir DIR] [--resume DIR] [--dry-run]`."""

from __future__ import annotations

import argparse
import os

from microcoder.launch.cliargs import add_recipe_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "launch", help="bring up a whole run (buffer, generators, executors, learner) and train"
    )
    add_recipe_arguments(p, "max_steps=5")
    p.add_argument(
        "--address",
        default=None,
        help="Ray cluster: 'local' (start a private one, default), 'auto' or HOST:PORT",
    )
    p.add_argument("--run-dir", default=None, help="run directory (default runs/<timestamp>)")
    p.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its newest checkpoint",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config and placement plan, then exit",
    )
    p.add_argument(
        "--cluster-cpus",
        type=float,
        default=None,
        help="with --dry-run: CPUs of the described cluster",
    )
    p.add_argument(
        "--cluster-gpus",
        type=float,
        default=None,
        help="with --dry-run: GPUs of the described cluster",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from microcoder.launch.config import load_config
    from microcoder.launch.placement import make_plan

    config_path = args.config
    if args.resume:
        config_path = Path(args.resume) / "config.toml"
        if not config_path.exists():
            print(f"launch: {args.resume} has no config.toml; is it a run directory?")
            return 2
    cfg = load_config(config_path, args.overrides)
    if args.address:
        cfg.cluster.address = args.address
    if args.dry_run:
        return dry_run(cfg, args, make_plan)
    from microcoder.launch.run_command import launch

    return launch(cfg, args)


def dry_run(cfg, args, make_plan) -> int:
    if cfg.cluster.device == "auto":
        gpus = args.cluster_gpus if args.cluster_gpus is not None else 0
        device = "cuda" if gpus else "cpu"
    else:
        device = cfg.cluster.device
    cpus = args.cluster_cpus if args.cluster_cpus is not None else float(os.cpu_count() or 1)
    gpus = args.cluster_gpus if args.cluster_gpus is not None else 0.0
    print(cfg.to_toml())
    plan = make_plan(cfg, device, cpus, gpus)
    print(plan.format())
    return 1 if plan.errors else 0

"""`microcoder launch CONFIG [--set k=v ...] [--address ...] [--run-dir DIR] [--resume DIR|auto] [--dry-run]`.

`--resume auto` with `--run-dir DIR`: resume DIR from its newest complete checkpoint if it has
one, else start fresh in DIR, saying which. So one command line both starts and continues a run:
what a scheduler that reruns it (Slurm --requeue, a Kubernetes Job retry, a spot preemption)
needs (deploy/, docs/architecture.md §10)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

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
        metavar="RUN_DIR|auto",
        help="continue the run in RUN_DIR from its newest complete checkpoint; 'auto' (with "
        "--run-dir DIR): continue DIR if it has one, else start fresh in DIR",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config and placement plan and make the launch's checks (problem "
        "file, shared paths, exporters), then exit: 0 = it would start, 1 = the plan does not "
        "fit, 2 = a check failed",
    )
    p.add_argument(
        "--cluster-cpus",
        type=float,
        default=None,
        help="with --dry-run: CPUs of the described cluster (default: this machine's; with "
        "--cluster-gpus and no --cluster-cpus they are not checked)",
    )
    p.add_argument(
        "--cluster-gpus",
        type=float,
        default=None,
        help="with --dry-run: GPUs of the described cluster",
    )
    p.add_argument(
        "--gpu-memory-gb",
        type=float,
        default=None,
        help="with --dry-run: memory of one GPU in GiB for the memory plan (default 80)",
    )
    p.add_argument(
        "--host-memory-gb",
        type=float,
        default=None,
        help="with --dry-run: host memory of one node in GiB; the plan refuses a learner whose "
        "offloaded states and published copy exceed it (default: not checked)",
    )
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help="with --dry-run: GPUs of one node, the learner ranks sharing its host memory "
        "(default 8)",
    )
    p.add_argument(
        "--flash-attn",
        action="store_true",
        help="with --dry-run: the learner's GPUs have flash-attn installed (the plan then "
        "counts no [L, L] attention scores); default: only if this machine has it and a GPU",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from microcoder.launch.config import load_config
    from microcoder.launch.run.placement import make_plan

    config_path = args.config
    if args.resume == "auto" and not resume_auto(args):
        return 2
    if args.resume:
        config_path = Path(args.resume) / "config.toml"
        if not config_path.exists():
            print(f"launch: {args.resume} has no config.toml; is it a run directory?")
            return 2
    cfg = load_config(config_path, args.overrides)
    if args.address:
        cfg.cluster.address = args.address
    if args.dry_run:
        from microcoder.launch.run.memory_check import dry_run_memory

        code = dry_run(cfg, args, make_plan)
        memory = dry_run_memory(
            cfg,
            args.cluster_gpus,
            args.gpu_memory_gb,
            host_gb=args.host_memory_gb,
            gpus_per_node=args.gpus_per_node,
            flash_attn=args.flash_attn,
        )
        return max(code, memory)
    from microcoder.launch.run.command import launch

    return launch(cfg, args)


def resume_auto(args: argparse.Namespace) -> bool:
    """`--resume auto`: set args.resume to --run-dir when that holds a complete checkpoint, else
    to None (a fresh start there); print which. False (said why) without --run-dir."""
    from microcoder.launch.run_dirs import latest_checkpoint

    if not args.run_dir:
        print("launch: --resume auto needs --run-dir DIR, the folder every rerun shares")
        return False
    newest = latest_checkpoint(Path(args.run_dir))
    if newest is None:
        print(f"launch: --resume auto: {args.run_dir} has no complete checkpoint; starting fresh")
        args.resume = None
    else:
        print(f"launch: --resume auto: resuming {args.run_dir} from {newest.name}")
        args.resume = args.run_dir
    return True


def dry_run(cfg, args, make_plan) -> int:
    """The launch's checks without starting anything: the same `preflight_errors` as the launch
    (problem file, shared paths of a joined cluster, exporters; exit 2 like the launch) and the
    placement plan on the described cluster (exit 1 when it does not fit)."""

    from microcoder.launch.run.command import preflight_errors, run_dir_path
    from microcoder.launch.run_dirs import latest_checkpoint

    if cfg.cluster.device == "auto":
        gpus = args.cluster_gpus if args.cluster_gpus is not None else 0
        device = "cuda" if gpus else "cpu"
    else:
        device = cfg.cluster.device
    # A described cluster (--cluster-gpus) without --cluster-cpus: its CPUs are unknown, and this
    # machine's count says nothing about them, so they are not checked (the plan says so).
    unknown_cpus = args.cluster_gpus is not None and args.cluster_cpus is None
    cpus = args.cluster_cpus if args.cluster_cpus is not None else float(os.cpu_count() or 1)
    gpus = args.cluster_gpus if args.cluster_gpus is not None else 0.0
    print(cfg.to_toml())
    plan = make_plan(cfg, device, math.inf if unknown_cpus else cpus, gpus)
    if unknown_cpus:
        plan.notes.append(
            f"the pools take {plan.cpus:g} CPUs; the cluster's CPUs are not checked: pass "
            "--cluster-cpus C to check them"
        )
    print(plan.format())
    run_dir = run_dir_path(cfg, args)
    if cfg.cluster.address != "local":
        run_dir = run_dir.resolve()
    resume_from = latest_checkpoint(run_dir) if args.resume else None
    errors = preflight_errors(cfg, run_dir, str(resume_from or Path(cfg.model.path)))
    for error in errors:
        print(f"launch: {error}")
    if errors:
        return 2
    return 1 if plan.errors else 0

"""`microcoder export RUN_DIR|CKPT --out DIR [--dtype bf16] [--merge]`: a checkpoint as a model
folder to ship (transformers and vLLM load it), in the dtype asked for; a LoRA run's as its
adapter folder, or with --merge as the merged model folder (learner/export.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write a run's newest (or a given) checkpoint as a model folder to ship"
    )
    p.add_argument(
        "source", help="a run folder (its newest complete checkpoint) or a checkpoints/step_N"
    )
    p.add_argument("--out", required=True, help="the model folder to write (new or empty)")
    p.add_argument(
        "--dtype",
        default="bf16",
        help="weight dtype: bf16 (default), fp16 or fp32 (fp32 = the exact master weights)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="a LoRA run: write the base with the adapter merged in (a model folder); "
        "without it a LoRA run exports its adapter folder (PEFT format)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from microcoder.launch.run_dirs import latest_checkpoint
    from microcoder.learner.export import export_checkpoint

    source = Path(args.source)
    ckpt = source
    if (source / "checkpoints").is_dir():
        ckpt = latest_checkpoint(source)
        if ckpt is None:
            print(f"{source} has no complete checkpoint yet", file=sys.stderr)
            return 2
    try:
        out = export_checkpoint(ckpt, Path(args.out), args.dtype, args.merge)
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        print(f"microcoder export: {err}", file=sys.stderr)
        return 2
    what = " merged" if args.merge else ""
    print(f"exported {ckpt} -> {out} ({args.dtype}{what})")
    return 0

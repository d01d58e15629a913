"""`microcoder config show CONFIG [--set k=v ...] [--docs]`: print the resolved config."""

from __future__ import annotations

import argparse
import sys

from microcoder.launch.cliargs import add_set_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="inspect configs (defaults < TOML < --set)")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = csub.add_parser("show", help="print the resolved config as TOML")
    show.add_argument(
        "config", nargs="?", help="TOML recipe, e.g. configs/tiny-cpu.toml (omit for defaults)"
    )
    add_set_argument(show, "learner.lr=1e-6")
    show.add_argument(
        "--docs", action="store_true", help="list every field with its default and meaning"
    )
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    from microcoder.config import describe
    from microcoder.launch.config import Config, load_config

    if args.docs:
        for key, default, doc in describe(Config):
            print(f"{key} = {default}\n    {' '.join(doc.split())}")
        return 0

    from microcoder.learner.algorithm.presets import describe_overrides

    cfg = load_config(args.config, args.overrides)
    print(cfg.to_toml(), end="")
    if note := describe_overrides(cfg.algorithm):
        print(note, file=sys.stderr)
    for note in cfg.notes():
        print(f"note: {note}", file=sys.stderr)
    return 0

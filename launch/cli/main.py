"""The `microcoder` command: a thin argparse front that imports heavy code only inside commands.

Each command lives in its own `launch/cmd_*.py` module exposing `register(subparsers)`; that
module may import only the standard library at top level, so `microcoder --help` stays instant.
Add a command by appending its module to COMMANDS.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from microcoder import __version__

# Order = order in --help. Only commands that work are listed (no stubs).
COMMANDS = [
    "microcoder.launch.cli.cmd_config",
    "microcoder.launch.cli.cmd_tiny_model",
    "microcoder.launch.cli.cmd_smoke",
    "microcoder.launch.cli.cmd_launch",
    "microcoder.launch.cli.cmd_compare",
    "microcoder.launch.cli.cmd_scale",
    "microcoder.launch.cli.cmd_status",
    "microcoder.launch.cli.cmd_bench",
    "microcoder.launch.cli.cmd_judge",
    "microcoder.launch.cli.cmd_eval",
    "microcoder.launch.cli.cmd_prompts",
    "microcoder.launch.cli.cmd_keys",
    "microcoder.launch.cli.cmd_data",
    "microcoder.launch.cli.cmd_model",
    "microcoder.launch.cli.cmd_export",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="microcoder",
        description="Asynchronous actor-based RL for code LLMs (MicroCoder-GRPO) with a sandboxed judge.",
    )
    parser.add_argument("--version", action="version", version=f"microcoder {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from microcoder.config import ConfigError

    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"microcoder: config error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("microcoder: interrupted", file=sys.stderr)
        return 130

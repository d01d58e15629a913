"""`microcoder bench NAME [--json]`: run a benchmark, print a table (or one JSON object).

A benchmark is a module in bench/ listed in BENCHES: bench/NAME.py, or for a benchmark of several
files the package bench/NAME/ (its __init__.py is the module, its parts are files beside it). It
must import only the standard library at top level and define:
  DESCRIPTION: str                      one line for --help
  add_arguments(parser) -> None         its own options
  run(args) -> dict                     the figures (JSON-serialisable)
  format_table(result: dict) -> str     the human-readable table
Benchmarks compare side by side in one run (ratios), because these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import importlib
import json

# name -> module. Only benchmarks that exist are listed.
BENCHES: dict[str, str] = {
    "judge": "microcoder.bench.judge",
    "judge-http": "microcoder.bench.judge_http",
    "env-sandbox": "microcoder.bench.env_sandbox",
    "buffer": "microcoder.bench.buffer",
    "learner": "microcoder.bench.learner",
    "memory-plan": "microcoder.bench.memory_plan",
    "learner-offload": "microcoder.bench.learner_offload",
    "checkpoint-overlap": "microcoder.bench.checkpoint_overlap",
    "weight-sync": "microcoder.bench.weight_sync",
    "generation": "microcoder.bench.generation",
    "pipeline": "microcoder.bench.pipeline",
    "eval": "microcoder.bench.eval",
    "peer": "microcoder.bench.peer",
    "dedup": "microcoder.bench.dedup",
    "data": "microcoder.bench.data",
    "learning": "microcoder.bench.learning",
    "sp-memory": "microcoder.bench.sp_memory",
    "difficulty": "microcoder.bench.difficulty",
}


def register(sub: argparse._SubParsersAction) -> None:
    if not BENCHES:
        return
    p = sub.add_parser("bench", help="run a benchmark and print its table (--json for figures)")
    bsub = p.add_subparsers(dest="bench", metavar="NAME", required=True)
    for name, module_name in BENCHES.items():
        module = importlib.import_module(module_name)
        bp = bsub.add_parser(name, help=module.DESCRIPTION, description=module.DESCRIPTION)
        bp.add_argument(
            "--json", action="store_true", help="print one JSON object with the figures"
        )
        module.add_arguments(bp)
        bp.set_defaults(func=run_bench, bench_module=module_name)


def run_bench(args: argparse.Namespace) -> int:
    module = importlib.import_module(args.bench_module)
    result = module.run(args)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(module.format_table(result))
    return 0

"""`microcoder model check DIR [--json] [--dump-logprobs FILE] [--no-vllm]
[--config-override KEY=JSON] [--sequence-parallel N]`: will this model train here, and correctly?
(learner/models/model_check.py, actors/engines/vllm_check.py; docs/models.md)."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="check a model folder before training it")
    msub = p.add_subparsers(dest="model_command", metavar="SUBCOMMAND", required=True)
    c = msub.add_parser(
        "check",
        help="family supported?, learner log-probs vs transformers, published names, round "
        "trip, vLLM greedy after loading the learner's weights",
    )
    c.add_argument("dir", help="a Hugging Face model folder (config.json, *.safetensors)")
    c.add_argument("--json", action="store_true", help="print the report as one JSON object")
    c.add_argument(
        "--dump-logprobs",
        metavar="FILE",
        default=None,
        help='write {"temperature", "sequences": [{"input_ids", "logprobs"}]}: the learner\'s '
        "log-probs of seeded sequences, logprobs[i] = log p(input_ids[i+1] | input_ids[..i])",
    )
    c.add_argument("--temperature", type=float, default=1.0, help="log-prob temperature (1.0)")
    c.add_argument("--seed", type=int, default=0, help="seed of the test sequences (0)")
    c.add_argument(
        "--no-vllm",
        action="store_true",
        help="skip the vLLM stage (an engine loads the learner's weights through the reload "
        "path; its greedy tokens must equal transformers')",
    )
    c.add_argument(
        "--config-override",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="change a key of the model's config.json for every stage, as model.config_overrides "
        'does in a run, e.g. rope_scaling=\'{"rope_type": "linear", "factor": 4.0}\' (repeatable)',
    )
    c.add_argument(
        "--vllm-timeout",
        type=float,
        default=900.0,
        metavar="S",
        help="seconds the vLLM stage's engine may take before it fails (900)",
    )
    c.add_argument(
        "--sequence-parallel",
        type=int,
        default=1,
        metavar="N",
        help="also compare the learner's log-probs with each packed row split over N spawned "
        "gloo ranks (learner.sequence_parallel = N), or say why the model cannot run so (1: off)",
    )
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when every check passed, 1 when one failed, 2 when the family is refused."""

    from microcoder.actors.engines.vllm_check import vllm_stage
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.models.model_check import check_model, format_report

    if not (Path(args.dir) / "config.json").is_file():
        print(f"model check: {args.dir} has no config.json; pass a model folder", file=sys.stderr)
        return 2
    try:
        overrides = parse_config_overrides(args.config_override)
    except ValueError as err:
        print(f"model check: {err}", file=sys.stderr)
        return 2
    try:
        report = check_model(
            args.dir,
            args.temperature,
            args.seed,
            args.dump_logprobs,
            vllm=None
            if args.no_vllm
            else functools.partial(vllm_stage, timeout_s=args.vllm_timeout),
            config_overrides=overrides,
            sequence_parallel=args.sequence_parallel,
        )
    finally:
        close_distributed()
    print(json.dumps(report) if args.json else format_report(report))
    if not report["family"]["supported"]:
        return 2
    return 0 if report["ok"] else 1


def parse_config_overrides(items: list[str]) -> dict:
    """`--config-override KEY=JSON` items as a dict (a value that is not JSON is a string)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"--config-override {item!r}: write KEY=JSON, e.g. "
                'rope_scaling=\'{"rope_type": "linear", "factor": 4.0}\''
            )
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out

"""`microcoder tiny-model [--warmstart] [--out DIR] [--seed N]`: build the tiny local policy.

Without --warmstart: random weights, tokenizer trained on stdlib sources (no download).
With --warmstart: tokenizer on the synthetic task corpus, then supervised fine-tuning until the
held-out sampled pass rate enters the target window (cached: a finished folder for the same
seed and settings is reused).
"""

from __future__ import annotations

import argparse
import sys
import time

from microcoder.launch.cliargs import add_set_argument
from microcoder.learner.models.tiny_model import build_tiny_model

DEFAULT_OUT = "runs/tiny-model"
DEFAULT_WARM_OUT = "runs/tiny-model-warm"
WARM_OUTS = {"synthetic": DEFAULT_WARM_OUT, "synthetic-long": "runs/tiny-model-long"}
"""Default --out of a warm start per synthetic family (one family's model never lands in the
folder of another's); a family not listed here needs --out."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tiny-model", help="build the tiny local Qwen2 policy and its tokenizer (no download)"
    )
    p.add_argument(
        "--out",
        default=None,
        help=f"output folder (Hugging Face format); default {DEFAULT_OUT}, or with "
        "--warmstart " + ", ".join(f"{v} for --family {k}" for k, v in WARM_OUTS.items()),
    )
    p.add_argument(
        "--seed", type=int, default=0, help="weight seed; same seed = same weights (default 0)"
    )
    w = p.add_argument_group("warm start (supervised fine-tune on the synthetic task family)")
    w.add_argument(
        "--warmstart",
        action="store_true",
        help="fine-tune until the held-out pass rate (T=1.0, sandbox-judged) enters the window",
    )
    w.add_argument(
        "--family",
        default=None,
        help="synthetic task family to fine-tune on: synthetic (default) or synthetic-long "
        "(long answers; also --set eval_max_new_tokens=96)",
    )
    w.add_argument("--target-low", type=float, default=None, help="window low end (0.2)")
    w.add_argument("--target-high", type=float, default=None, help="window high end (0.45)")
    w.add_argument("--max-steps", type=int, default=None, help="give up after N steps (600)")
    w.add_argument("--eval-every", type=int, default=None, help="evaluate every N steps (10)")
    add_set_argument(
        w,
        dest="set",
        help="any other warm-start setting (see learner/warmstart/config.py), e.g. --set lr=5e-4",
    )
    w.add_argument("--no-progress", action="store_true", help="log lines instead of a bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.warmstart:
        return run_warmstart(args)
    if args.set or any(
        v is not None
        for v in (args.target_low, args.target_high, args.max_steps, args.eval_every, args.family)
    ):
        print("tiny-model: warm-start options need --warmstart", file=sys.stderr)
        return 2

    out = args.out or DEFAULT_OUT
    t0 = time.time()
    print(
        f"tiny-model: training the tokenizer and building the model (seed {args.seed}) ...",
        flush=True,
    )
    out = build_tiny_model(out, seed=args.seed)
    print(f"tiny-model: saved to {out} in {time.time() - t0:.1f} s")
    return 0


def warmstart_config(args: argparse.Namespace):
    """WarmStartConfig from the flags; raises ConfigError naming a bad key or value."""
    from pydantic import ValidationError

    from microcoder.config import ConfigError, parse_value
    from microcoder.learner.warmstart.config import WarmStartConfig

    values: dict = {}
    for item in args.set:
        key, eq, text = item.partition("=")
        if not eq:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set lr=5e-4")
        if key not in WarmStartConfig.model_fields:
            names = ", ".join(WarmStartConfig.model_fields)
            raise ConfigError(f"--set {key}: unknown warm-start setting; valid: {names}")
        values[key] = parse_value(text)
    for key in ("family", "target_low", "target_high", "max_steps", "eval_every"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    try:
        return WarmStartConfig(**values)
    except ValidationError as e:
        raise ConfigError(f"warm start: {e}") from None


def run_warmstart(args: argparse.Namespace) -> int:
    cfg = warmstart_config(args)
    from microcoder.learner.warmstart.build import warm_start
    from microcoder.learner.warmstart.sft import WarmStartError
    from microcoder.sandbox import SandboxUnavailable

    out = args.out or WARM_OUTS.get(cfg.family)
    if out is None:
        print(f"tiny-model: family {cfg.family} has no default folder; pass --out", file=sys.stderr)
        return 2
    print(f"tiny-model: warm start ({cfg.family}) into {out} (seed {args.seed}) ...", flush=True)
    try:
        r = warm_start(out, seed=args.seed, cfg=cfg, progress=not args.no_progress)
    except WarmStartError as e:
        print(f"tiny-model: warm start failed: {e}", file=sys.stderr)
        return 1
    except FileExistsError as e:
        print(f"tiny-model: {e}", file=sys.stderr)
        return 1
    except SandboxUnavailable as e:
        print(f"tiny-model: the judge's sandbox is unavailable: {e}", file=sys.stderr)
        return 1
    if r.cached:
        print(
            f"tiny-model: {out} already holds this warm start (seed {r.seed}): step {r.step}, "
            f"held-out pass rate {r.pass_rate:.3f}; nothing to do"
        )
    else:
        print(
            f"tiny-model: kept the checkpoint of step {r.step} with held-out pass rate "
            f"{r.pass_rate:.3f} (window [{cfg.target_low}, {cfg.target_high}]); "
            f"saved to {out} in {r.seconds:.0f} s"
        )
    return 0

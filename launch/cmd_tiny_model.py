"""`microcoder tiny-model --out DIR [--seed N]`: build the tiny local policy (no download)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tiny-model", help="build the tiny local Qwen2 policy and its tokenizer (no download)"
    )
    p.add_argument("--out", required=True, help="output folder (Hugging Face format)")
    p.add_argument(
        "--seed", type=int, default=0, help="weight seed; same seed = same weights (default 0)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    from microcoder.learner.tiny_model import build_tiny_model

    t0 = time.time()
    print(
        f"tiny-model: training the tokenizer and building the model (seed {args.seed}) ...",
        flush=True,
    )
    out = build_tiny_model(args.out, seed=args.seed)
    print(f"tiny-model: saved to {out} in {time.time() - t0:.1f} s")
    return 0

"""`microcoder bench learner`: packed vs padded training throughput on long-tailed lengths;
with `--memory`, peak memory of chunked vs unchunked log-probs instead (bench/learner_memory.py);
with `--intake`, a batch's way from rank 0 to every rank before/after issue 17 instead
(bench/learner_intake.py).

Two Learners on the same tiny model and the same batches, one with sequence packing (one row
per micro-batch, varlen attention, no padding) and one with right-padded rows (rows × longest ≤
the same token budget); their steps alternate so machine noise hits both alike. Throughput
counts real (non-padding) prompt + response tokens per second of the whole optimizer step
(forward, backward, AdamW). Response lengths are long-tailed: lognormal, clipped to
[8, max_len], which is what code RL produces (most answers short, a few running to the limit).
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
import time

from microcoder.bench import learner_intake, learner_memory
from microcoder.bench.model_folder import add_model_argument, model_folder

DESCRIPTION = (
    "packed vs padded training tokens/s on long-tailed response lengths (goal ≥ 1.5×); "
    "--memory: peak memory of chunked vs unchunked log-probs (goal ratio ≤ 0.5); "
    "--intake: batch intake per step, lists + Ray object store vs packed tensors + broadcast"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--intake",
        action="store_true",
        help="time a batch's intake per step (2 ranks), before vs after issue 17, instead",
    )
    learner_intake.add_arguments(parser.add_argument_group("--intake options"))
    parser.add_argument(
        "--memory",
        action="store_true",
        help="measure peak memory of one micro-batch, chunked vs unchunked log-probs, instead",
    )
    memory = parser.add_argument_group("--memory options")
    learner_memory.add_arguments(memory)
    add_model_argument(parser)
    parser.add_argument(
        "--groups", type=int, default=None, help="groups per batch (default 8; 64 with --intake)"
    )
    parser.add_argument("--group-size", type=int, default=8, help="responses per group (default 8)")
    parser.add_argument(
        "--max-len", type=int, default=1024, help="max response tokens (default 1024)"
    )
    parser.add_argument(
        "--median-len", type=int, default=120, help="median response tokens (default 120)"
    )
    parser.add_argument(
        "--micro-batch-tokens", type=int, default=4096, help="token budget (default 4096)"
    )
    parser.add_argument("--steps", type=int, default=2, help="timed steps per mode (default 2)")
    parser.add_argument("--seed", type=int, default=0)


def synthetic_groups(args: argparse.Namespace, step: int, vocab: int) -> list:
    """Groups with lognormal response lengths (sigma 1.0) and mixed rewards (all have signal)."""

    from microcoder.learner.sample import SampleGroup, TrainSample

    rng = random.Random(args.seed * 7919 + step)
    groups = []
    for g in range(args.groups):
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(32, 128))]
        samples = []
        for i in range(args.group_size):
            n = int(min(max(rng.lognormvariate(math.log(args.median_len), 1.0), 8), args.max_len))
            resp = [rng.randrange(vocab) for _ in range(n)]
            samples.append(
                TrainSample(prompt, resp, [-8.0] * n, 1.0, float(i % 2), n == args.max_len, "CE", 0)
            )
        groups.append(SampleGroup(f"{step}-{g}", samples))
    return groups


def padding_fraction(groups: list, budget: int) -> float:
    """Share of the padded mode's token slots that are padding."""
    from microcoder.learner.packing import padded_rows

    lengths = [len(s.prompt_ids) + len(s.response_ids) for g in groups for s in g.samples]
    rows = padded_rows(range(len(lengths)), lengths, budget)
    slots = sum(len(r) * max(lengths[i] for i in r) for r in rows)
    return 1.0 - sum(lengths) / slots


def run(args: argparse.Namespace) -> dict:
    if args.groups is None:
        args.groups = 64 if args.intake else 8
    if args.intake:
        return learner_intake.run(args)
    if args.memory:
        return learner_memory.run(args)

    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    with tempfile.TemporaryDirectory() as tmp:
        model = model_folder(args.model, (), tmp)
        algo = AlgorithmConfig(truncation_mask="none")
        learners = {
            mode: Learner(
                model,
                LearnerConfig(
                    lr=1e-6, micro_batch_tokens=args.micro_batch_tokens, packing=mode == "packed"
                ),
                algo,
            )
            for mode in ("packed", "padded")
        }
        vocab = learners["packed"].model.config.vocab_size
        tokens = {m: 0.0 for m in learners}
        seconds = {m: 0.0 for m in learners}
        pad = []
        for step in range(args.steps + 1):  # step 0 warms up both
            groups = synthetic_groups(args, step, vocab)
            pad.append(padding_fraction(groups, args.micro_batch_tokens))
            for mode, learner in learners.items():
                start = time.perf_counter()
                metrics = learner.train_step(groups)
                if step:
                    seconds[mode] += time.perf_counter() - start
                    tokens[mode] += metrics["tokens"]
        params = sum(p.numel() for p in learners["packed"].model.parameters())
        del learners
        close_distributed()
    packed = tokens["packed"] / seconds["packed"]
    padded = tokens["padded"] / seconds["padded"]
    return {
        "packed_tokens_per_s": packed,
        "padded_tokens_per_s": padded,
        "ratio": packed / padded,
        "padding_fraction": sum(pad[1:]) / max(len(pad) - 1, 1),
        "tokens_per_step": tokens["packed"] / max(args.steps, 1),
        "sequences_per_step": args.groups * args.group_size,
        "micro_batch_tokens": args.micro_batch_tokens,
        "model_params": params,
        "steps": args.steps,
    }


def format_table(result: dict) -> str:
    if result.get("intake"):
        return learner_intake.format_table(result)
    if "peak_chunked_mb" in result:
        return learner_memory.format_table(result)
    r = result
    lines = [
        f"learner throughput, {r['sequences_per_step']} sequences/step "
        f"(~{r['tokens_per_step']:.0f} real tokens), budget {r['micro_batch_tokens']} tokens/micro-batch, "
        f"{r['model_params'] / 1e6:.1f} M params, {r['steps']} timed steps",
        f"{'mode':<8} {'tokens/s':>10}",
        f"{'packed':<8} {r['packed_tokens_per_s']:>10.0f}",
        f"{'padded':<8} {r['padded_tokens_per_s']:>10.0f}   ({100 * r['padding_fraction']:.0f}% of slots are padding)",
        f"ratio packed/padded: {r['ratio']:.2f}x (goal >= 1.5x)",
    ]
    return "\n".join(lines)

"""`microcoder bench sp-memory`: one long sequence's forward + backward at
learner.sequence_parallel = 1 (one rank) and = N (N gloo ranks, learner/sequence_parallel.py):
the tokens each rank's layers see, each rank's peak memory over its baseline, the step's seconds.

The model is bench/learner_memory.py's (a Qwen2 with the tiny model's layer shape, seeded random
weights, here with a 4,096-token vocabulary so the head does not hide the body); the micro-batch
is one sequence of `--tokens` tokens (16-token prompt), chunked log-probs (1,024). Memory is
learner_memory.py's measure: peak RSS (VmHWM reset through /proc/self/clear_refs just before
the step, with MALLOC_MMAP_THRESHOLD_ fixed so freed large blocks leave the resident set) minus
the RSS before it, in a fresh process per rank. The ranks run side by side on the same cores, so
compare the two rows of one run, not runs on different days.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from microcoder.bench.learner_memory import _status_kb, build_model, micro_batch_groups

DESCRIPTION = "one long sequence at sequence_parallel 1 vs N: tokens and peak memory a rank"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=int, default=8192, help="sequence length (8192)")
    parser.add_argument("--sp", type=int, default=2, help="N of the split run (2)")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers (2)")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size (256)")


def worker(model: str, out: str, tokens: int, sp: int) -> None:
    """One rank (env rendezvous): one micro-batch's loss forward + backward; writes
    OUT.RANK.json {"tokens", "peak_mb", "seconds", "loss"}."""

    from microcoder.learner.batch import build_batch, mask_generator
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    cfg = LearnerConfig(world_size=sp, sequence_parallel=sp, micro_batch_tokens=tokens)
    learner = Learner(model, cfg, AlgorithmConfig(truncation_mask="none"), device="cpu")
    (group,) = micro_batch_groups(8 * tokens, learner.model.config.vocab_size)
    group.samples[:] = group.samples[:1]  # one sequence of `tokens` tokens
    (mb,) = learner._micro_batches(build_batch([group], learner.algo, mask_generator(0, 0)))
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    baseline = _status_kb("VmRSS")
    start = time.perf_counter()
    loss, _ = learner._loss_and_stats(mb, None, 1)
    (loss * learner.world).backward()
    seconds = time.perf_counter() - start
    peak = _status_kb("VmHWM")
    record = {"tokens": mb.input_ids.shape[1], "peak_mb": (peak - baseline) / 1024}
    record |= {"seconds": seconds, "loss": float(loss)}
    Path(f"{out}.{learner.rank}.json").write_text(json.dumps(record))
    del learner
    close_distributed()


def run(args: argparse.Namespace) -> dict:
    from microcoder.learner.models.sp_check import spawn_gloo_ranks

    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)  # inherited by the ranks
    shape = argparse.Namespace(tokens=args.tokens, vocab=4096, layers=args.layers)
    shape.hidden = args.hidden
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", shape)
        for sp in (1, args.sp):
            out = Path(tmp) / f"sp{sp}"
            argv = ["-m", __name__, str(model), str(out), str(args.tokens), str(sp)]
            spawn_gloo_ranks(argv, sp, timeout_s=1800)
            rows[sp] = [json.loads(Path(f"{out}.{r}.json").read_text()) for r in range(sp)]
    one = rows[1][0]
    split = rows[args.sp]
    return {
        "tokens": args.tokens,
        "sp": args.sp,
        "layers": args.layers,
        "hidden": args.hidden,
        "sp1": one,
        "split": split,
        "peak_ratio": max(r["peak_mb"] for r in split) / one["peak_mb"],
        "loss_sum_diff": abs(sum(r["loss"] for r in split) - one["loss"]),
    }


def format_table(result: dict) -> str:
    r = result
    lines = [
        f"one sequence of {r['tokens']} tokens, {r['layers']} layers x hidden {r['hidden']}, "
        "forward + backward, peak RSS over the RSS before the step",
        f"{'run':<10} {'rank':>4} {'tokens':>7} {'peak MB':>9} {'seconds':>8}",
        f"{'SP 1':<10} {0:>4} {r['sp1']['tokens']:>7} {r['sp1']['peak_mb']:>9.0f} "
        f"{r['sp1']['seconds']:>8.1f}",
    ]
    for k, row in enumerate(r["split"]):
        lines.append(
            f"{'SP ' + str(r['sp']):<10} {k:>4} {row['tokens']:>7} {row['peak_mb']:>9.0f} "
            f"{row['seconds']:>8.1f}"
        )
    lines.append(
        f"peak a rank, SP {r['sp']} / SP 1: {r['peak_ratio']:.2f}; "
        f"|sum of the ranks' losses - SP 1 loss| {r['loss_sum_diff']:.1e}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))

"""`microcoder bench checkpoint-overlap`: the time of a learner step that overlaps an
asynchronous checkpoint's background write against a step that does not, in the same process
(issue 49; goal ratio ≤ 1.1).

One Learner on the tiny model (runs/tiny-model-warm, the tiny run's model) trains rounds of two
steps on the same kind of synthetic batches: a plain step, then `start_save` (the snapshot to
host memory, which the training loop does pay) and a step while the writer thread writes the DCP
shards and the HF folder. The steps alternate so machine noise hits both alike; the medians are
compared. Also reported: the snapshot's seconds (the loop's cost of an async save), the write's
seconds, and a synchronous save's seconds (what the loop paid before).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from microcoder.bench.model_folder import add_model_argument, model_folder

DESCRIPTION = (
    "learner step time overlapping an async checkpoint write vs not, same run (goal ≤ 1.1×)"
)
USUAL = ("runs/tiny-model-warm",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_argument(parser, USUAL)
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds (default 10)")
    parser.add_argument("--groups", type=int, default=4, help="groups per batch (default 4)")
    parser.add_argument("--group-size", type=int, default=8, help="responses per group (default 8)")
    parser.add_argument(
        "--response-len", type=int, default=48, help="tokens per response (default 48)"
    )


def batch(args: argparse.Namespace, step: int, vocab: int) -> list:
    from microcoder.learner.sample import SampleGroup, TrainSample

    rng = random.Random(step)
    groups = []
    for g in range(args.groups):
        prompt = [rng.randrange(vocab) for _ in range(64)]
        samples = [
            TrainSample(
                prompt,
                [rng.randrange(vocab) for _ in range(args.response_len)],
                [-4.0] * args.response_len,
                1.0,
                float(i % 2),
                False,
                "CE",
                0,
            )
            for i in range(args.group_size)
        ]
        groups.append(SampleGroup(f"{step}-{g}", samples))
    return groups


def run(args: argparse.Namespace) -> dict:
    from microcoder.learner.checkpoint import save_checkpoint, start_save
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    plain, overlapped, snapshot = [], [], []
    outlasted = 0
    with tempfile.TemporaryDirectory() as tmp:
        model = model_folder(args.model, USUAL, tmp)
        learner = Learner(model, LearnerConfig(lr=1e-6), AlgorithmConfig(truncation_mask="none"))
        vocab = learner.model.config.vocab_size
        learner.train_step(batch(args, 0, vocab))  # warm-up
        t0 = time.perf_counter()
        save_checkpoint(learner, Path(tmp) / "sync")
        sync_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        start_save(learner, Path(tmp) / "alone").wait(600)
        write_s = time.perf_counter() - t0  # snapshot + write with nothing beside it
        for r in range(args.rounds):  # plain first on even rounds, overlapped first on odd ones
            for overlap in (r % 2 == 1, r % 2 == 0):
                pending = None
                if overlap:
                    t0 = time.perf_counter()
                    pending = start_save(learner, Path(tmp) / f"ckpt{r}")
                    snapshot.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                learner.train_step(batch(args, 2 * r + overlap, vocab))
                (overlapped if overlap else plain).append(time.perf_counter() - t0)
                if pending is not None:
                    outlasted += not pending.done()  # the write ran through the whole step
                    pending.wait(600)
        params = sum(p.numel() for p in learner.model.parameters())
        del learner
        close_distributed()
    return {
        "plain_step_s": statistics.median(plain),
        "overlapped_step_s": statistics.median(overlapped),
        "ratio": statistics.median(overlapped) / statistics.median(plain),
        "snapshot_s": statistics.median(snapshot),
        "sync_save_s": sync_s,
        "async_save_alone_s": write_s,
        "rounds_write_outlasted_step": outlasted,
        "rounds": args.rounds,
        "model_params": params,
    }


def format_table(result: dict) -> str:
    r = result
    return "\n".join(
        [
            f"checkpoint overlap ({r['model_params'] / 1e6:.2f} M params, {r['rounds']} rounds)",
            f"  plain step (median)                 {r['plain_step_s']:.3f} s",
            f"  step overlapping a write (median)   {r['overlapped_step_s']:.3f} s",
            f"  ratio (goal <= 1.1)                 {r['ratio']:.3f}",
            f"  async save: snapshot (loop's cost)  {r['snapshot_s']:.3f} s",
            f"  synchronous save (before)           {r['sync_save_s']:.3f} s",
            f"  async save, snapshot + write alone  {r['async_save_alone_s']:.3f} s",
            f"  rounds whose write outlasted the step: {r['rounds_write_outlasted_step']}",
        ]
    )

"""`microcoder bench learner-offload`: the optimizer step with learner.offload none / optimizer /
params: its time, its peak, where the training state lives, and that the weights agree bit for bit.

For each mode one fresh process builds the Learner (FSDP2, one rank, fp32) on a random-weight
model of `--shape` (bench/memory_plan.py's shapes: `tiny`, `0.5b` = Qwen2.5-0.5B's), gives
every parameter the same seeded random gradient, and runs the trainer's own `_clip_and_step`
(clip, AdamW, zero): one untimed step (AdamW creates its moments), then `--steps` timed ones.
The step's peak is the resident set's high-water mark over the mark just before it (the method
of bench/learner_memory.py: VmHWM reset through /proc/self/clear_refs, glibc's mmap threshold
fixed so freed tensors leave the resident set). On a CPU learner host and device are one
memory, so that peak is every temporary of the step wherever it would be: torch's AdamW
temporaries (none, params), or the streamed buckets' device copies plus those (optimizer).
Where each part of the state lives comes from the live objects (learner/offload.py:
`resident_bytes`). The parent compares a digest of each mode's fp32 masters after the steps.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from microcoder.bench.learner_memory import _status_kb
from microcoder.bench.memory_plan import build_model

DESCRIPTION = "optimizer step time, peak and state placement with learner.offload"
MODES = ("none", "optimizer", "params")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", choices=["tiny", "0.5b"], default="tiny", help="model shape")
    parser.add_argument("--steps", type=int, default=3, help="timed optimizer steps (default 3)")
    parser.add_argument(
        "--bucket-mb", type=int, default=0, help="StreamedAdamW bucket, MiB of moments (0: 512)"
    )


def worker(model: str, mode: str, steps: int, bucket_mb: int) -> dict:
    """`steps` timed `_clip_and_step`s of a `mode` Learner in this process."""

    import torch

    from microcoder.learner import offload
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    if bucket_mb:
        offload.BUCKET_BYTES = bucket_mb * 2**20
    cfg = LearnerConfig(offload=mode, lr=1e-3, grad_clip=1.0)
    learner = Learner(model, cfg, AlgorithmConfig(truncation_mask="none"))
    params = list(learner.model.parameters())

    def set_grads(step: int) -> None:
        gen = torch.Generator().manual_seed(step)
        for p in params:
            local = p.to_local()
            g = torch.randn(local.shape, generator=gen).to(local.device)
            p.grad = offload._like(p, g)

    seconds = []
    peaks = []
    for step in range(steps + 1):
        set_grads(step)
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        baseline = _status_kb("VmRSS")
        start = time.perf_counter()
        learner._clip_and_step()
        if step:
            seconds.append(time.perf_counter() - start)
            peaks.append((_status_kb("VmHWM") - baseline) * 1024)
    digest = hashlib.sha256()
    for name, t in sorted(learner.full_state_dict(masters=True).items()):
        digest.update(name.encode() + t.contiguous().view(torch.uint8).numpy().tobytes())
    placement = offload.resident_bytes(learner.model, learner.optimizer)
    close_distributed()
    return {
        "mode": mode,
        "step_s": statistics.median(seconds),
        "step_peak_bytes": max(peaks),
        "placement": placement,
        "digest": digest.hexdigest(),
        "params": sum(p.to_local().numel() for p in params),
    }


def run(args: argparse.Namespace) -> dict:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", args.shape, 2048)
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
        for mode in MODES:
            out = Path(tmp) / f"{mode}.json"
            cmd = [sys.executable, "-m", "microcoder.bench.learner_offload", str(model), mode]
            cmd += [str(args.steps), str(args.bucket_mb), str(out)]
            subprocess.run(cmd, check=True, env=env)
            rows.append(json.loads(out.read_text()))
    same = len({r["digest"] for r in rows}) == 1
    return {"shape": args.shape, "steps": args.steps, "bit_equal": same, "rows": rows}


def format_table(result: dict) -> str:
    gib = 2**30
    head = f"{'offload':<10}{'step s':>9}{'step peak GiB':>15}{'host GiB':>10}{'device GiB':>12}"
    lines = [f"shape {result['shape']}, {result['rows'][0]['params']:,} parameters", head]
    for r in result["rows"]:
        place = {"host": 0, "device": 0}
        for where, n in r["placement"].values():
            place[where] += n
        lines.append(
            f"{r['mode']:<10}{r['step_s']:>9.3f}{r['step_peak_bytes'] / gib:>15.3f}"
            f"{place['host'] / gib:>10.3f}{place['device'] / gib:>12.3f}"
        )
    lines.append(f"fp32 masters bit-equal across modes: {result['bit_equal']}")
    return "\n".join(lines)


if __name__ == "__main__":
    model, mode, steps, bucket_mb, out = sys.argv[1:6]
    result = worker(model, mode, int(steps), int(bucket_mb))
    Path(out).write_text(json.dumps(result))

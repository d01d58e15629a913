"""`microcoder bench memory-plan`: the memory plan (learner/models/memory_plan.py) against measured CPU peaks.

For each model shape (`tiny`: the tiny model's layers with a 4,096 vocabulary, untied; `0.5b`:
Qwen2.5-0.5B's shape, tied, 151,936 vocabulary; both random-init, no download), each token
count and checkpointing off and on, one fresh process builds the Learner (FSDP2, one rank,
fp32) and runs one training step on the learner's own path: `_loss_and_stats` forward,
`backward()`, then `_clip_and_step` (clip, AdamW, which allocates its moments on this first
step). It reports two high-water marks over the resident set just before the step (the method
of bench/learner_memory.py, whose worker helpers this reuses: VmHWM reset through
/proc/self/clear_refs, glibc's mmap threshold fixed so freed tensors leave the resident set):
after the backward, and after the optimizer step. The plan's figures for the same quantities:
`LearnerPlan.backward_step()` and `LearnerPlan.step_peak()`.

It also saves the loss and the gradients, so the parent checks that checkpointing changes
neither (to `--atol`), and reports the checkpointing ratio (peak after backward, on / off).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from microcoder.learner.models.memory_plan import qwen25_shape
from microcoder.learner.models.tiny_model import TINY_ARCH

SHAPES = {
    "tiny": {**TINY_ARCH, "vocab_size": 4096, "tie_word_embeddings": False},
    "0.5b": qwen25_shape("0.5b"),
}
"""The measured shapes: config.json fields of a Qwen2 (public shapes; random weights)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny", help="model shape")
    parser.add_argument(
        "--tokens",
        default="1024,4096,8192",
        help="comma-separated micro-batch sizes in tokens (default 1024,4096,8192)",
    )
    parser.add_argument("--chunk", type=int, default=1024, help="learner.logprob_chunk_tokens")
    parser.add_argument("--atol", type=float, default=1e-5, help="loss/gradient agreement")


def build_model(out: Path, shape: str, max_tokens: int) -> Path:
    """A seeded random-weight Qwen2 of `shape` saved as an HF folder (no tokenizer needed)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**{**SHAPES[shape], "max_position_embeddings": max(max_tokens, 2048)})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out, safe_serialization=True)
    return out


def worker(model: str, out: str, tokens: int, chunk: int, ckpt: bool) -> dict:
    """One training step in this process; peaks over the resident set before it, in bytes."""
    import gc

    from safetensors.torch import save_file

    from microcoder.bench.learner_memory import _status_kb, micro_batch_groups
    from microcoder.learner.batch import build_batch, mask_generator
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    cfg = LearnerConfig(
        logprob_chunk_tokens=chunk, micro_batch_tokens=tokens, activation_checkpointing=ckpt
    )
    learner = Learner(model, cfg, AlgorithmConfig(truncation_mask="none"))
    vocab = learner.model.config.vocab_size
    batch = build_batch(micro_batch_groups(tokens, vocab), learner.algo, mask_generator(0, 0))
    (mb,) = learner._micro_batches(batch)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    baseline = _status_kb("VmRSS")
    loss, _ = learner._loss_and_stats(mb, None)
    loss.backward()
    backward = _status_kb("VmHWM")
    tensors = {f"grad.{n}": p.grad.full_tensor() for n, p in learner.model.named_parameters()}
    tensors["loss"] = loss.detach().reshape(1)
    tensors["logp"] = tensors["loss"].clone()  # max_differences compares a "logp" entry too
    save_file({k: v.contiguous() for k, v in tensors.items()}, out)
    del tensors
    gc.collect()
    learner._clip_and_step()
    step = _status_kb("VmHWM")
    close_distributed()
    return {"backward": (backward - baseline) * 1024, "step": (step - baseline) * 1024}


def _measure(model: Path, out: Path, tokens: int, chunk: int, ckpt: bool) -> dict:
    cmd = [sys.executable, "-m", "microcoder.bench.memory_plan", str(model), str(out)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    args = [str(tokens), str(chunk), str(int(ckpt))]
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"memory worker exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def planned(shape: str, tokens: int, chunk: int, ckpt: bool) -> dict:
    """The plan's figures for what the worker measures (fp32, one rank)."""
    from microcoder.learner.models.memory_plan import ModelShape, plan_learner

    plan = plan_learner(
        ModelShape.from_config({**SHAPES[shape], "model_type": "qwen2"}),
        world_size=1,
        compute_bytes=4,
        micro_batch_tokens=tokens,
        logprob_chunk_tokens=chunk,
        activation_checkpointing=ckpt,
    )
    return {"backward": plan.backward_step(), "step": plan.step_peak()}


def run(args: argparse.Namespace) -> dict:
    from microcoder.bench.learner_memory import max_differences

    counts = [int(t) for t in args.tokens.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", args.shape, max(counts))
        for tokens in counts:
            row: dict = {"tokens": tokens}
            for ckpt in (False, True):
                out = Path(tmp) / f"{tokens}-{int(ckpt)}.safetensors"
                key = "ckpt" if ckpt else "no_ckpt"
                row[key] = _measure(model, out, tokens, args.chunk, ckpt)
                row[key + "_plan"] = planned(args.shape, tokens, args.chunk, ckpt)
            d = max_differences(Path(tmp) / f"{tokens}-0.safetensors", out)
            row |= {"loss_diff": d["loss"], "grad_diff": d["grad"]}
            row["ckpt_ratio"] = row["ckpt"]["backward"] / row["no_ckpt"]["backward"]
            rows.append(row)
    return {"shape": args.shape, "chunk": args.chunk, "atol": args.atol, "rows": rows}


def format_table(result: dict) -> str:
    gb = 2**30
    lines = [
        f"memory plan vs measured CPU peak, {result['shape']} shape, fp32, one rank, "
        f"logprob chunk {result['chunk']}; GiB over the resident set before the step",
        f"{'tokens':>7} {'ckpt':>5} {'phase':>9} {'planned':>8} {'measured':>9} {'ratio':>6}",
    ]
    for r in result["rows"]:
        for key in ("no_ckpt", "ckpt"):
            for phase in ("backward", "step"):
                plan, got = r[key + "_plan"][phase], r[key][phase]
                lines.append(
                    f"{r['tokens']:>7} {'on' if key == 'ckpt' else 'off':>5} {phase:>9} "
                    f"{plan / gb:>8.3f} {got / gb:>9.3f} {plan / got:>6.2f}"
                )
        agree = max(r["loss_diff"], r["grad_diff"]) <= result["atol"]
        lines.append(
            f"{r['tokens']:>7} checkpointing ratio (after backward, on/off) {r['ckpt_ratio']:.3f}"
            f"; loss diff {r['loss_diff']:.1e}, max grad diff {r['grad_diff']:.1e} "
            f"({'agree' if agree else 'DISAGREE'} to {result['atol']:g})"
        )
    return "\n".join(lines)


DESCRIPTION = "the memory plan's learner figures against measured CPU peaks of one training step"

if __name__ == "__main__":
    model_dir, out_file, tokens_arg, chunk_arg, ckpt_arg = sys.argv[1:6]
    print(json.dumps(worker(model_dir, out_file, int(tokens_arg), int(chunk_arg), ckpt_arg == "1")))

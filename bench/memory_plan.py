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

The long-context knobs (issue 44): `--world W` runs W gloo ranks (fresh processes, one
rendezvous), each measuring its own peaks; the row is the largest rank's. `--sp N`, `--offload
optimizer|params` and `--replicas R` set learner.sequence_parallel, learner.offload and
learner.replicas. The batch holds 8 sequences and gives each data-parallel rank (W / N of them)
`--tokens` tokens, one micro-batch. On a CPU the "device" and the host are the same memory, so
the plan's figure is the device's first-step peak plus the host states the first step
allocates (`planned`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from microcoder.bench.learner_memory import _status_kb, max_differences, micro_batch_groups
from microcoder.learner.models.memory_plan import (
    OFFLOAD_BUCKET_BYTES,
    ModelShape,
    plan_learner,
    qwen25_shape,
)
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
    parser.add_argument("--world", type=int, default=1, help="gloo ranks (learner.world_size)")
    parser.add_argument("--sp", type=int, default=1, help="learner.sequence_parallel")
    parser.add_argument(
        "--offload", choices=["none", "optimizer", "params"], default="none", help="learner.offload"
    )
    parser.add_argument("--replicas", type=int, default=1, help="learner.replicas (HSDP)")
    parser.add_argument(
        "--ckpt", choices=["both", "on", "off"], default="both", help="activation checkpointing"
    )


def build_model(out: Path, shape: str, max_tokens: int) -> Path:
    """A seeded random-weight Qwen2 of `shape` saved as an HF folder (no tokenizer needed)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**{**SHAPES[shape], "max_position_embeddings": max(max_tokens, 2048)})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out, safe_serialization=True)
    return out


def knobs(args: argparse.Namespace) -> dict:
    """The LearnerConfig fields of the measured shape (issue 44's knobs)."""
    return {
        "world_size": args.world,
        "sequence_parallel": args.sp,
        "offload": args.offload,
        "replicas": args.replicas,
    }


def worker(model: str, out: str, tokens: int, chunk: int, ckpt: bool, extra: dict) -> dict:
    """One training step in this process (one rank); peaks over the resident set before it."""

    from safetensors.torch import save_file

    from microcoder.learner.batch import build_batch, mask_generator
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    cfg = LearnerConfig(
        logprob_chunk_tokens=chunk,
        micro_batch_tokens=tokens,
        activation_checkpointing=ckpt,
        **extra,
    )
    learner = Learner(model, cfg, AlgorithmConfig(truncation_mask="none"))
    vocab = learner.model.config.vocab_size
    data_ranks = cfg.world_size // cfg.sequence_parallel
    groups = micro_batch_groups(tokens * data_ranks, vocab)
    batch = build_batch(groups, learner.algo, mask_generator(0, 0))
    (mb,) = learner._micro_batches(batch)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    baseline = _status_kb("VmRSS")
    # num_seqs from the whole batch: under SP a rank's slice holds only some of its sequences
    loss, _ = learner._loss_and_stats(mb, None, len(batch))
    loss.backward()
    backward = _status_kb("VmHWM")
    tensors = {f"grad.{n}": p.grad.full_tensor() for n, p in learner.model.named_parameters()}
    tensors["loss"] = loss.detach().reshape(1)
    tensors["logp"] = tensors["loss"].clone()  # max_differences compares a "logp" entry too
    if learner.rank == 0:
        save_file({k: v.contiguous() for k, v in tensors.items()}, out)
    del tensors
    gc.collect()
    learner._clip_and_step()
    step = _status_kb("VmHWM")
    close_distributed()
    return {"backward": (backward - baseline) * 1024, "step": (step - baseline) * 1024}


def _measure(
    model: Path, out: Path, tokens: int, chunk: int, ckpt: bool, extra: dict | None = None
) -> dict:
    """Each rank's peaks (a fresh process per rank); the largest rank's, with the list."""
    from microcoder.learner.distributed import free_port

    extra = extra or {}
    world = extra.get("world_size", 1)
    cmd = [sys.executable, "-m", "microcoder.bench.memory_plan", str(model), str(out)]
    cmd += [str(tokens), str(chunk), str(int(ckpt)), json.dumps(extra)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    if world > 1:
        env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
        env |= {"WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            cmd,
            env=env | ({"RANK": str(r), "LOCAL_RANK": str(r)} if world > 1 else {}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(world)
    ]
    ranks = []
    for rank, proc in enumerate(procs):
        stdout, stderr = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"memory worker {rank} exited {proc.returncode}:\n{stderr[-3000:]}")
        ranks.append(json.loads(stdout.strip().splitlines()[-1]))
    peak = {k: max(r[k] for r in ranks) for k in ("backward", "step")}
    return peak | {"ranks": ranks}


def planned(shape: str, tokens: int, chunk: int, ckpt: bool, extra: dict | None = None) -> dict:
    """The plan's figures for what a rank's worker measures (fp32): the device's backward and
    first step. With offload the host is this process too, so what the first step allocates on
    the host counts as well: the moments (and, with "params", the gradients and the host
    step's temporary)."""

    extra = extra or {}
    model = ModelShape.from_config({**SHAPES[shape], "model_type": "qwen2"})
    plan = plan_learner(
        model,
        compute_bytes=4,
        micro_batch_tokens=tokens,
        logprob_chunk_tokens=chunk,
        activation_checkpointing=ckpt,
        longest_sequence=-(-tokens // 8),
        kernel="varlen",
        **{"world_size": 1, **extra},
    )
    shard = extra.get("world_size", 1) // extra.get("replicas", 1)
    p = model.params() // shard
    offload = extra.get("offload", "none")
    backward = plan.backward_step()
    if offload == "none":
        return {"backward": backward, "step": plan.step_peak()}
    if offload == "optimizer":
        # The first step allocates the host moments bucket by bucket; the process peaks at the
        # last bucket, with every host moment made and that bucket's device copy and AdamW
        # temporary (a plain bucket: the largest shard, the embedding, is stepped first, while
        # the host holds no moments yet).
        last = min(8 * p, OFFLOAD_BUCKET_BYTES) * 3 // 2
        return {"backward": backward, "step": max(backward, plan.grads + 8 * p + last)}
    # "params": the reduced gradients land on the host as the layers' backward frees their
    # activations (after the head's blocks are gone), as they would on the device without
    # offload; the host step holds them, the moments and AdamW's temporary
    backward = replace(plan, grads=4 * p).backward_step()
    return {"backward": backward, "step": max(backward, 16 * p)}


def run(args: argparse.Namespace) -> dict:
    counts = [int(t) for t in args.tokens.split(",")]
    extra = knobs(args)
    modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.ckpt]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", args.shape, max(counts))
        for tokens in counts:
            row: dict = {"tokens": tokens}
            for ckpt in modes:
                out = Path(tmp) / f"{tokens}-{int(ckpt)}.safetensors"
                key = "ckpt" if ckpt else "no_ckpt"
                row[key] = _measure(model, out, tokens, args.chunk, ckpt, extra)
                row[key + "_plan"] = planned(args.shape, tokens, args.chunk, ckpt, extra)
            if len(modes) == 2:
                d = max_differences(Path(tmp) / f"{tokens}-0.safetensors", out)
                row |= {"loss_diff": d["loss"], "grad_diff": d["grad"]}
                row["ckpt_ratio"] = row["ckpt"]["backward"] / row["no_ckpt"]["backward"]
            rows.append(row)
    return {
        "shape": args.shape,
        "chunk": args.chunk,
        "atol": args.atol,
        "knobs": extra,
        "rows": rows,
    }


def format_table(result: dict) -> str:
    gb = 2**30
    k = result.get("knobs", {})
    setup = ", ".join(f"{n} {v}" for n, v in k.items()) if k else "one rank"
    lines = [
        f"memory plan vs measured CPU peak, {result['shape']} shape, fp32, {setup}, "
        f"logprob chunk {result['chunk']}; GiB over the resident set before the step "
        "(the largest rank)",
        f"{'tokens':>7} {'ckpt':>5} {'phase':>9} {'planned':>8} {'measured':>9} {'ratio':>6}",
    ]
    for r in result["rows"]:
        for key in [m for m in ("no_ckpt", "ckpt") if m in r]:
            for phase in ("backward", "step"):
                plan = r[key + "_plan"][phase]
                got = r[key][phase]
                lines.append(
                    f"{r['tokens']:>7} {'on' if key == 'ckpt' else 'off':>5} {phase:>9} "
                    f"{plan / gb:>8.3f} {got / gb:>9.3f} {plan / got:>6.2f}"
                )
        if "loss_diff" not in r:
            continue
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
    knob_fields = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    print(
        json.dumps(
            worker(
                model_dir, out_file, int(tokens_arg), int(chunk_arg), ckpt_arg == "1", knob_fields
            )
        )
    )

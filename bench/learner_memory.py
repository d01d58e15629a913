"""`microcoder bench learner --memory`: peak memory of one micro-batch, chunked vs unchunked log-probs.

A Qwen2 with Qwen2.5's vocabulary (151,936) and a small body (2 layers, hidden 256, the tiny
model's layer shape) and one packed micro-batch of `--tokens` tokens. Each variant, the whole
[tokens, vocab] head (`learner.logprob_chunk_tokens = 0`) and the chunked one (`--chunk`), runs
in a fresh process: build the Learner (FSDP2, one rank), collate the micro-batch, then the
forward and backward of the trainer's own `_loss_and_stats`. No optimizer step: its state
would add the same amount to both and hide the difference.

How memory is measured, and why: torch on the CPU has no allocator statistics (no
`torch.cuda.max_memory_allocated` counterpart), so the worker reads the kernel's resident-set
high-water mark. Just before the step it resets that mark to the current resident set (writing
5 to /proc/self/clear_refs, Linux >= 4.0) and reads VmRSS as the baseline; after the backward,
VmHWM - baseline is the step's peak. This is honest for what matters here: every large tensor
(> 32 MiB, a chunk of logits is 0.6 GB) is its own mmap, returned to the kernel when freed, so
the mark follows the live tensors; smaller heap blocks glibc keeps can only add to both
variants alike. The gradients (kept after backward) are part of both peaks.
That needs glibc to hand freed blocks back: by default it raises its mmap threshold each time a
mapped block is freed (up to 32 MiB), after which blocks of that size come from the heap and
stay resident when freed, so a run of small chunks would read as a high, fragmented heap
(measured: 309 MB instead of 45 MB for 2 MiB chunks). The workers therefore run with
MALLOC_MMAP_THRESHOLD_ fixed at 128 KiB (glibc's initial value; setting it turns the raising
off), so every block above that is mapped and unmapped with its tensor.

The workers also save their loss, log-probs and gradients, and the parent checks that the two
variants agree to `--atol` (1e-5).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from microcoder.learner.models.tiny_model import TINY_ARCH

QWEN_VOCAB = 151_936
"""Qwen2.5's vocabulary size (every size of the family)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokens", type=int, default=8192, help="tokens in the micro-batch (default 8192)"
    )
    parser.add_argument(
        "--chunk", type=int, default=1024, help="logprob_chunk_tokens of the chunked variant"
    )
    parser.add_argument("--vocab", type=int, default=QWEN_VOCAB, help="vocabulary (151,936)")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size (default 256)")
    parser.add_argument("--atol", type=float, default=1e-5, help="agreement tolerance")


def build_model(out: Path, args: argparse.Namespace) -> Path:
    """A random-weight Qwen2 (seeded, untied head) saved as an HF folder; no tokenizer needed."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    arch = {**TINY_ARCH, "num_hidden_layers": args.layers, "hidden_size": args.hidden}
    arch["intermediate_size"] = TINY_ARCH["intermediate_size"] * args.hidden // 256
    arch["max_position_embeddings"] = max(args.tokens, 2048)
    config = Qwen2Config(vocab_size=args.vocab, tie_word_embeddings=False, **arch)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(out, safe_serialization=True)
    return out


def micro_batch_groups(tokens: int, vocab: int) -> list:
    """One group of 8 sequences (16-token prompt, the rest response) that fills `tokens` exactly."""

    from microcoder.learner.sample import SampleGroup, TrainSample

    rng = random.Random(0)
    seqs = 8
    prompt_len = 16
    lens = [tokens // seqs + (i < tokens % seqs) for i in range(seqs)]
    samples = []
    for i, n in enumerate(lens):
        prompt = [rng.randrange(vocab) for _ in range(prompt_len)]
        resp = [rng.randrange(vocab) for _ in range(n - prompt_len)]
        samples.append(
            TrainSample(prompt, resp, [-8.0] * len(resp), 0.9, float(i % 2), False, "WA", 0)
        )
    return [SampleGroup("memory", samples)]


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {key}")


def worker(model: str, out: str, chunk: int, tokens: int) -> dict:
    """One variant in this process: the step's peak RSS over the baseline; saves loss and grads."""

    import torch
    from safetensors.torch import save_file

    from microcoder.learner.batch import build_batch, mask_generator
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    cfg = LearnerConfig(logprob_chunk_tokens=chunk, micro_batch_tokens=tokens)
    learner = Learner(model, cfg, AlgorithmConfig(truncation_mask="none"))
    vocab = learner.model.config.vocab_size
    batch = build_batch(micro_batch_groups(tokens, vocab), learner.algo, mask_generator(0, 0))
    micros = learner._micro_batches(batch)
    if len(micros) != 1:
        raise RuntimeError(f"expected one micro-batch of {tokens} tokens, got {len(micros)}")
    (mb,) = micros
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    except OSError as err:
        raise RuntimeError(
            f"cannot reset the peak-RSS mark ({err}); this benchmark needs Linux >= 4.0 with a "
            "writable /proc/self/clear_refs"
        ) from err
    baseline = _status_kb("VmRSS")
    loss, _ = learner._loss_and_stats(mb, None)
    loss.backward()
    peak = _status_kb("VmHWM")
    # The gradients first: a later forward unshards the root's parameters again (FSDP2 keeps the
    # root unsharded after a forward), and named_parameters() would then show the unsharded ones.
    tensors = {f"grad.{n}": p.grad.full_tensor() for n, p in learner.model.named_parameters()}
    with torch.no_grad():
        tensors |= {"loss": loss.detach().reshape(1), "logp": learner._logp(learner.model, mb)[0]}
    save_file({k: v.contiguous() for k, v in tensors.items()}, out)
    close_distributed()
    return {
        "peak_mb": (peak - baseline) / 1024,
        "baseline_mb": baseline / 1024,
        "response_tokens": int(mb.targets.numel()),
    }


def _run_variant(model: Path, out: Path, chunk: int, tokens: int) -> dict:
    cmd = [sys.executable, "-m", "microcoder.bench.learner_memory", str(model), str(out)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    proc = subprocess.run(
        [*cmd, str(chunk), str(tokens)], capture_output=True, text=True, check=False, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"memory worker (chunk {chunk}) exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def max_differences(a_path: Path, b_path: Path) -> dict[str, float]:
    """Largest absolute difference of the loss, the log-probs and any gradient."""
    from safetensors.torch import load_file

    a = load_file(a_path)
    b = load_file(b_path)
    if a.keys() != b.keys():
        raise RuntimeError(f"the variants saved different tensors: {sorted(a.keys() ^ b.keys())}")
    diff = {k: float((a[k].double() - b[k].double()).abs().max()) for k in a}
    grads = [v for k, v in diff.items() if k.startswith("grad.")]
    return {"loss": diff["loss"], "logp": diff["logp"], "grad": max(grads)}


UNCHUNKED_BLOCKS = 5
"""fp32 [tokens, vocab] blocks alive at once on the unchunked path (logits, logits / T,
log_softmax, and its exp and product for the entropy): the estimate check_memory uses."""


def check_memory(tokens: int, vocab: int) -> None:
    """Refuse to start a run whose unchunked variant cannot fit in the available memory (it would
    be killed, or push the machine's other work out), naming the largest --tokens that fits."""
    meminfo = Path("/proc/meminfo").read_text().split("\n")
    kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    per_token = UNCHUNKED_BLOCKS * vocab * 4
    need = tokens * per_token
    free = kb * 1024 - 2**30  # 1 GiB for the model and the body
    if need > free:
        raise SystemExit(
            f"the unchunked variant needs about {need / 2**30:.1f} GiB for {tokens} tokens "
            f"({UNCHUNKED_BLOCKS} x tokens x vocab x 4 bytes) and {kb / 2**20:.1f} GiB is "
            f"available; run with --tokens {max(free // per_token // 256 * 256, 0)} or less"
        )


def run(args: argparse.Namespace) -> dict:
    if args.chunk <= 0:
        raise SystemExit("--chunk must be positive: it is the chunked variant's chunk size")
    check_memory(args.tokens, args.vocab)
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", args)
        unchunked = _run_variant(model, Path(tmp) / "unchunked.safetensors", 0, args.tokens)
        chunked = _run_variant(model, Path(tmp) / "chunked.safetensors", args.chunk, args.tokens)
        diff = max_differences(
            Path(tmp) / "chunked.safetensors", Path(tmp) / "unchunked.safetensors"
        )
    n = chunked["response_tokens"]
    return {
        "peak_chunked_mb": chunked["peak_mb"],
        "peak_unchunked_mb": unchunked["peak_mb"],
        "ratio": chunked["peak_mb"] / unchunked["peak_mb"],
        "bytes_per_token_chunked": chunked["peak_mb"] * 2**20 / args.tokens,
        "bytes_per_token_unchunked": unchunked["peak_mb"] * 2**20 / args.tokens,
        "baseline_mb": unchunked["baseline_mb"],
        "max_abs_diff_loss": diff["loss"],
        "max_abs_diff_logp": diff["logp"],
        "max_abs_diff_grad": diff["grad"],
        "agree": max(diff.values()) <= args.atol,
        "atol": args.atol,
        "tokens": args.tokens,
        "response_tokens": n,
        "chunk_tokens": args.chunk,
        "vocab": args.vocab,
        "layers": args.layers,
        "hidden": args.hidden,
        "method": "peak RSS (VmHWM reset via /proc/self/clear_refs) minus RSS before the step, "
        "one fresh process per variant",
    }


def format_table(result: dict) -> str:
    r = result
    agree = "yes" if r["agree"] else "NO"
    return "\n".join(
        [
            f"learner memory, one micro-batch of {r['tokens']} tokens ({r['response_tokens']} "
            f"log-prob rows), vocab {r['vocab']}, {r['layers']} layers x hidden {r['hidden']}, "
            f"forward + backward, peak RSS over {r['baseline_mb']:.0f} MB before the step",
            f"{'variant':<22} {'peak MB':>9} {'bytes/token':>12}",
            f"{'unchunked':<22} {r['peak_unchunked_mb']:>9.0f} "
            f"{r['bytes_per_token_unchunked']:>12.0f}",
            f"{'chunked (' + str(r['chunk_tokens']) + ' tokens)':<22} "
            f"{r['peak_chunked_mb']:>9.0f} {r['bytes_per_token_chunked']:>12.0f}",
            f"ratio chunked/unchunked: {r['ratio']:.3f} (goal <= 0.5)",
            f"agree to {r['atol']:g}: {agree} (max |diff| loss {r['max_abs_diff_loss']:.1e}, "
            f"log-probs {r['max_abs_diff_logp']:.1e}, gradients {r['max_abs_diff_grad']:.1e})",
        ]
    )


if __name__ == "__main__":
    model_dir, out_file, chunk_arg, tokens_arg = sys.argv[1:5]
    print(json.dumps(worker(model_dir, out_file, int(chunk_arg), int(tokens_arg))))

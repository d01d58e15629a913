"""gpu-check stage 1: the learner on one bare GPU (torch, transformers, safetensors; no vLLM, no Ray).

Needs torch (CUDA), transformers, safetensors and pydantic (microcoder's config classes), and
this checkout: microcoder need not be installed (`importable_checkout`).

Runs the learner's own code (microcoder.learner: FSDP2 over a one-rank process group, bf16
compute, fp32 master weights) on a random-init Qwen2 of Qwen2.5-0.5B's shape (no download):
1. memory: one training step (forward, backward, clip + AdamW) per token count (4K/8K/16K) with
   activation checkpointing off and on. The CUDA peak of the backward (torch.cuda.
   max_memory_allocated over what was allocated before the step) against the memory plan's
   figure for it (learner/models/memory_plan.py: `LearnerPlan.backward_step()`), and the absolute peak
   against `LearnerPlan.peak()`; the gradient norm with checkpointing on must equal the
   one without;
2. log-probs: the learner's packed log-probs (fp32, its varlen SDPA kernel) against transformers'
   own forward of each sequence, and the bf16 learner's (flash-attn when installed) loosely;
3. publish: the published weights (`Learner.full_state_dict()`) are in the serving dtype (bf16);
4. issue 44's knobs on one device (scripts/gpu_check_scale.py): learner.offload's modes from one
   start, fallback attention vs flash-attn, a sliding-window peak, and SP / HSDP as not runnable.

Prints one JSON line per measurement, then a summary line (`"check": "summary"`); exit 0 only when
every check passed. Paste the output into bench/RESULTS.md. `--device cpu --small` runs the same
on a 2-layer toy model on the CPU (what tests/gpu_path/test_gpu_check_stage1.py does); memory is
then reported as planned only (no CUDA counter).

Usage: python scripts/gpu_check_stage1.py [--device cuda|cpu] [--small] [--tokens 4096,8192,16384]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

RATIO_OK = (0.8, 1.2)
"""Measured / planned backward peak the check accepts (the plan's goal is ±20%)."""
LOGP_ATOL_FP32 = 2e-3
"""Largest |learner − transformers| log-prob on the fp32 path (different kernels, same math)."""
LOGP_MEAN_BF16 = 0.05
"""Largest mean |learner − transformers| log-prob of the bf16 learner against fp32 transformers."""
GRAD_RTOL = 1e-3
"""Largest relative difference of the gradient norm with checkpointing and without (same weights,
same batch; the on-policy GRPO loss itself is 0 whatever the weights, so it proves nothing)."""


REPO = Path(__file__).resolve().parents[1]


def importable_checkout() -> str:
    """Make `microcoder.<folder>` importable from this checkout when microcoder is not installed
    (a bare GPU box: no `pip install -e .`): the package's submodules are the checkout's top-level
    folders (pyproject.toml's package-dir), so the checkout root joins the package's path.
    Returns where microcoder comes from."""
    try:
        import microcoder.learner  # noqa: F401

        return "installed"
    except ImportError:
        sys.path.insert(0, str(REPO))
        import microcoder

        microcoder.__path__.append(str(REPO))
        return f"checkout {REPO}"


def model_shape(small: bool) -> dict:
    """The config.json fields of the model to check: Qwen2.5-0.5B's shape (public numbers; the
    weights are random), or with `small` a 2-layer toy (the CPU test's) with a 300-token vocabulary.
    Call after `importable_checkout`."""
    from microcoder.learner.models.memory_plan import qwen25_shape
    from microcoder.learner.models.tiny_model import SMALL_ARCH

    if small:
        return {**SMALL_ARCH, "vocab_size": 300, "tie_word_embeddings": False}
    return qwen25_shape("0.5b")


def emit(record: dict) -> dict:
    print(json.dumps({"stage": 1, **record}), flush=True)
    return record


def build_model(folder: Path, shape: dict, max_tokens: int) -> Path:
    """A seeded random Qwen2 saved as safetensors (the learner loads it like any checkpoint)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(**{**shape, "max_position_embeddings": max(max_tokens, 2048)})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder, safe_serialization=True)
    return folder


def groups(tokens: int, vocab: int, sizes: tuple[int, ...] = ()) -> list:
    """One group whose sequences (prompts of up to 16 tokens) fill `tokens`: 8 equal ones, or
    `sizes`."""
    import random

    from microcoder.learner.sample import SampleGroup, TrainSample

    rng = random.Random(tokens)
    lens = sizes or tuple(tokens // 8 + (i < tokens % 8) for i in range(8))
    prompt = [rng.randrange(vocab) for _ in range(min(16, min(lens) // 2))]  # the group's prompt
    samples = []
    for i, n in enumerate(lens):
        resp = [rng.randrange(vocab) for _ in range(n - len(prompt))]
        samples.append(TrainSample(prompt, resp, [-8.0] * len(resp), 0.9, i % 2, False, "WA", 0))
    return [SampleGroup(f"stage1-{tokens}", samples)]


def learner_for(model: Path, device: str, tokens: int, **cfg):
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.trainer import Learner

    lc = LearnerConfig(micro_batch_tokens=tokens, **cfg)
    return Learner(str(model), lc, AlgorithmConfig(truncation_mask="none"), device=device)


def micro_batch(learner, tokens: int, sizes: tuple[int, ...] = ()):
    from microcoder.learner.batch import build_batch, mask_generator

    vocab = learner.model.config.vocab_size
    batch = build_batch(groups(tokens, vocab, sizes), learner.algo, mask_generator(0, 0))
    (mb,) = learner._micro_batches(batch)
    return batch, mb


def plan_for(shape: dict, tokens: int, ckpt: bool, chunk: int, compute_bytes: int):
    """The memory plan's learner figures for one rank (learner/models/memory_plan.py)."""
    from microcoder.learner.models.memory_plan import ModelShape, plan_learner

    return plan_learner(
        ModelShape.from_config({**shape, "model_type": "qwen2"}),
        world_size=1,
        compute_bytes=compute_bytes,
        micro_batch_tokens=tokens,
        logprob_chunk_tokens=chunk,
        activation_checkpointing=ckpt,
    )


def memory_checks(model: Path, args, shape: dict, counts: list[int]) -> list[dict]:
    """One step per token count, checkpointing off then on; gradient norms compared per count."""
    import torch

    cuda = args.device == "cuda"
    out, norms = [], {}
    for ckpt in (False, True):
        learner = learner_for(model, args.device, max(counts), activation_checkpointing=ckpt)
        chunk, bytes_ = learner.cfg.logprob_chunk_tokens, learner.dtype.itemsize
        for tokens in counts:
            _, mb = micro_batch(learner, tokens)
            gc.collect()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated() if cuda else 0
            t0 = time.perf_counter()
            loss, _ = learner._loss_and_stats(mb, None)
            loss.backward()
            if cuda:
                torch.cuda.synchronize()
            backward = torch.cuda.max_memory_allocated() - base if cuda else None
            norm = float(learner._clip_and_step())
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
            peak = torch.cuda.max_memory_allocated() if cuda else None
            norms[tokens, ckpt] = norm
            plan = plan_for(shape, tokens, ckpt, chunk, bytes_)
            ratio = backward / plan.backward_step() if backward else None
            ok = ratio is None or RATIO_OK[0] <= ratio <= RATIO_OK[1]
            out.append(
                emit(
                    {
                        "check": "memory",
                        "tokens": tokens,
                        "ckpt": ckpt,
                        "dtype": str(learner.dtype).removeprefix("torch."),
                        "backward_gib": _gib(backward),
                        "planned_backward_gib": _gib(plan.backward_step()),
                        "ratio": None if ratio is None else round(ratio, 3),
                        "peak_gib": _gib(peak),
                        "planned_peak_gib": _gib(plan.peak()),
                        "step_s": round(seconds, 3),
                        "tokens_per_s": round(tokens / seconds),
                        "grad_norm": norm,
                        "ok": ok,
                    }
                )
            )
        del learner
        _free(cuda)
    for tokens in counts:  # checkpointing recomputes the same forward: the same gradients
        on, off = norms[tokens, True], norms[tokens, False]
        diff = abs(on - off) / max(off, 1e-12)
        ok = off > 0 and diff <= GRAD_RTOL
        out.append(emit({"check": "ckpt_grad_norm", "tokens": tokens, "rel_diff": diff, "ok": ok}))
    return out


def logprob_checks(model: Path, args, sizes: tuple[int, ...]) -> list[dict]:
    """The learner's packed log-probs against transformers' forward of each sequence (fp32)."""
    import torch
    from transformers import AutoModelForCausalLM

    from microcoder.learner import attention

    tokens = sum(sizes)
    ref_model = AutoModelForCausalLM.from_pretrained(
        model, dtype=torch.float32, attn_implementation="eager"
    )
    ref_model.to(args.device).eval()
    out = []
    for dtype, impl in (("float32", attention.NAME), ("auto", "auto")):
        learner = learner_for(model, args.device, tokens, dtype=dtype, attn_implementation=impl)
        batch, mb = micro_batch(learner, tokens, sizes)
        with torch.no_grad():
            logp = learner._logp(learner.model, mb)[0].float().cpu()
            ref = []
            for i in mb.seq_index.unique_consecutive().tolist():
                ids, p = batch.input_ids[i], int(batch.prompt_lens[i])
                logits = ref_model(input_ids=ids[None].to(args.device)).logits[0, p - 1 : -1]
                t = float(batch.temperatures[i])
                lp = torch.log_softmax(logits.float() / t, -1).cpu()
                ref.append(lp.gather(1, ids[p:, None])[:, 0])
        diff = (logp - torch.cat(ref)).abs()
        fp32 = learner.dtype == torch.float32
        ok = diff.max().item() <= LOGP_ATOL_FP32 if fp32 else diff.mean().item() <= LOGP_MEAN_BF16
        out.append(
            emit(
                {
                    "check": "logprobs",
                    "dtype": str(learner.dtype).removeprefix("torch."),
                    "attention": learner.attn,
                    "sequences": len(sizes),
                    "max_abs_diff": diff.max().item(),
                    "mean_abs_diff": diff.mean().item(),
                    "ok": ok,
                }
            )
        )
        del learner
        _free(args.device == "cuda")
    return out


def publish_check(model: Path, args) -> dict:
    """The published weights are in the compute (serving) dtype: bf16 on CUDA."""

    learner = learner_for(model, args.device, 256)
    weights = learner.full_state_dict()
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in weights.values()})
    want = learner.dtype
    ok = all(t.dtype == want for t in weights.values() if t.is_floating_point())
    nbytes = sum(t.numel() * t.element_size() for t in weights.values())
    del learner, weights
    _free(args.device == "cuda")
    return emit(
        {
            "check": "publish",
            "want": str(want).removeprefix("torch."),
            "dtypes": dtypes,
            "gib": _gib(nbytes),
            "ok": ok,
        }
    )


def _gib(n: int | None) -> float | None:
    return None if n is None else round(n / 2**30, 3)


def _free(cuda: bool) -> None:
    import torch

    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--small", action="store_true", help="a 2-layer toy model (CPU test)")
    parser.add_argument("--tokens", default="", help="token counts (default 4096,8192,16384)")
    args = parser.parse_args(argv)
    source = importable_checkout()
    try:
        import pydantic  # noqa: F401  (microcoder's config classes)
        import safetensors  # noqa: F401
        import torch
        import transformers  # noqa: F401
    except ImportError as err:
        error = f"{err.name} is not installed: pip install {err.name} (stage 1 needs torch, "
        emit(
            {
                "check": "summary",
                "ok": False,
                "error": error + "transformers, safetensors, pydantic)",
            }
        )
        return 1

    if args.device == "cuda" and not torch.cuda.is_available():
        emit({"check": "summary", "ok": False, "error": "no CUDA device: run on a GPU machine"})
        return 1
    shape = model_shape(args.small)
    default = "128,256" if args.small else "4096,8192,16384"
    counts = [int(t) for t in (args.tokens or default).split(",")]
    sizes = (40, 40, 33, 24, 20) if args.small else (1500, 1500, 700, 300, 96)
    t0 = time.perf_counter()
    from gpu_check_scale import scale_checks  # this folder: issue 44's knobs on one device

    from microcoder.learner.distributed import close_distributed

    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", shape, max(counts))
        records = memory_checks(model, args, shape, counts)
        records += logprob_checks(model, args, sizes)
        records.append(publish_check(model, args))
        records += scale_checks(model, Path(tmp), args, shape, sys.modules[__name__])
    close_distributed()
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"vllm", "ray"})
    records.append(emit({"check": "imports", "vllm_or_ray": heavy, "ok": not heavy}))
    failed = [r for r in records if not r["ok"]]
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    emit(
        {
            "check": "summary",
            "device": device,
            "torch": torch.__version__,
            "microcoder": source,
            "model": "small" if args.small else "qwen2-0.5b-shape",
            "checks": len(records),
            "failed": [r["check"] for r in failed],
            "not_runnable": [r["check"] for r in records if r.get("runnable") is False],
            "seconds": round(time.perf_counter() - t0, 1),
            "ok": not failed,
        }
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())

"""gpu-check stage 1, the scale knobs of issue 44 on one device (scripts/gpu_check_stage1.py runs it).

What one GPU can show of learner.offload, the attention kernels and the memory plan's counts:
1. offload: `learner.offload` = "none", "optimizer" and "params", each from the same random
   start, `OFFLOAD_STEPS` training steps on the same micro-batch. Per mode: the largest fp32
   master-weight difference from "none" (0 is required for "optimizer": learner/offload.py's
   StreamedAdamW runs torch's own AdamW on the device, bucket by bucket; "params" steps on the
   host, so its difference is reported, not required), how far the weights moved (a zero
   difference means something only if they did), the CUDA peak over the steps
   (torch.cuda.max_memory_allocated) against `LearnerPlan.peak()` for that mode (as
   launch/run/memory_check.py plans it: the attention kernel in use, the longest sequence of
   the batch), each step's seconds, and where the states live: the moments in pinned host
   buffers (`StreamedAdamW.host_resident()`), or, with "params", every parameter shard on the
   host (`offload.params_offloaded`) and pinned;
2. attention: microcoder's fallback varlen SDPA against flash-attn's varlen kernel (bf16
   log-probs of the same micro-batch, and the seconds of a forward) when flash-attn imports;
   otherwise a line saying only the fallback ran;
3. window: one step at `WINDOW_TOKENS` of the same shape with a sliding window on every layer
   (the fallback attention then keeps [heads, L, L] scores, the plan's `attention_scores`),
   checkpointing on: the CUDA peak against the plan's;
4. not runnable: sequence parallelism and HSDP need two or more GPUs; one line each says so
   (never faked with two processes on one GPU).

On the CPU (`--device cpu --small`: tests/gpu_path/test_gpu_check_stage1.py) the same code runs
on the toy model: no CUDA counters (peaks are planned only), no pinning, and "params"
offload keeps its shards on the host the same way. One JSON line per measurement (`emit`).
"""

from __future__ import annotations

import math
import time

OFFLOAD_STEPS = 3
"""Training steps per offload mode."""
OFFLOAD_TOKENS = 4096
"""Micro-batch tokens of the offload steps on the 0.5B shape (the toy uses its own count)."""
OFFLOAD_LR = 1e-5
"""Learning rate of the offload steps: large enough that the fp32 masters visibly move."""
WINDOW_TOKENS = 8192
"""Micro-batch tokens of the sliding-window step on the 0.5B shape (8 sequences)."""
MULTI_GPU = {
    "sequence_parallel": "learner.sequence_parallel > 1 splits each sequence over >= 2 ranks",
    "hsdp": "learner.replicas > 1 needs replicas x shards >= 2 ranks (one GPU each)",
}
"""The issue-44 paths one GPU cannot run, and why."""


def _host_flags(learner, cuda: bool) -> dict:
    """Where this learner's training state lives after its steps (learner/offload.py's checks)."""
    from microcoder.learner import offload

    opt, model = learner.optimizer, learner.model
    places = {k: v[0] for k, v in offload.resident_bytes(model, opt).items()}
    flags: dict = {"places": places}
    if isinstance(opt, offload.StreamedAdamW):
        flags["moments_host_resident"] = opt.host_resident()  # pinned too, on CUDA
        flags["streamed_gib"] = _gib(opt.streamed.to_device)
    if learner.cfg.offload == "params":
        flags["params_offloaded"] = offload.params_offloaded(model)
        if cuda:
            flags["params_pinned"] = all(offload._local(p).is_pinned() for p in model.parameters())
    return flags


def _host_ok(mode: str, flags: dict, cuda: bool) -> bool:
    """The mode's states are where it promises: moments on the host (pinned on CUDA) for
    "optimizer"; masters, gradients and moments on the host for "params"."""
    places = flags["places"]
    if mode == "none":
        return set(places.values()) == {"device"}
    if mode == "optimizer":
        return flags["moments_host_resident"] and places["moments"] == "host"
    pinned = flags.get("params_pinned", True) if cuda else True
    return flags["params_offloaded"] and set(places.values()) == {"host"} and pinned


def _kernel(learner) -> str:
    """The plan's name for the attention kernel this learner runs."""
    return "flash" if learner.attn == "flash_attention_2" else "varlen"


def _plan(learner, config: dict, tokens: int, longest: int, **knobs):
    """The memory plan of this one-rank learner (launch/run/memory_check.py's inputs)."""
    from microcoder.learner.models.memory_plan import ModelShape, plan_learner

    cfg = learner.cfg
    return plan_learner(
        ModelShape.from_config({**config, "model_type": "qwen2"}),
        world_size=1,
        compute_bytes=learner.dtype.itemsize,
        micro_batch_tokens=tokens,
        logprob_chunk_tokens=cfg.logprob_chunk_tokens,
        activation_checkpointing=bool(cfg.activation_checkpointing),
        longest_sequence=longest,
        kernel=_kernel(learner),
        **knobs,
    )


def _steps(learner, mb, n: int, cuda: bool) -> tuple[list[float], list[float], int | None]:
    """`n` training steps on `mb`: (seconds, gradient norms, CUDA peak over them or None)."""
    import torch

    _sync(cuda)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    seconds, norms = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        loss, _ = learner._loss_and_stats(mb, None)
        loss.backward()
        norms.append(float(learner._clip_and_step()))
        _sync(cuda)
        seconds.append(round(time.perf_counter() - t0, 3))
    return seconds, norms, torch.cuda.max_memory_allocated() if cuda else None


def offload_checks(model, args, shape: dict, tokens: int, s1) -> list[dict]:
    """Each offload mode from the same start, `OFFLOAD_STEPS` steps; weights compared to "none"."""
    cuda = args.device == "cuda"
    out, start, ref = [], None, None
    for mode in ("none", "optimizer", "params"):
        learner = s1.learner_for(model, args.device, tokens, offload=mode, lr=OFFLOAD_LR)
        _, mb = s1.micro_batch(learner, tokens)
        if start is None:
            start = learner.full_state_dict(masters=True)
        seconds, norms, peak = _steps(learner, mb, OFFLOAD_STEPS, cuda)
        flags = _host_flags(learner, cuda)
        weights = learner.full_state_dict(masters=True)
        plan = _plan(learner, shape, tokens, -(-tokens // 8), offload=mode)
        ref = ref or weights
        diff = max((weights[k] - ref[k]).abs().max().item() for k in ref)
        moved = max((weights[k] - start[k]).abs().max().item() for k in start)
        host_ok = _host_ok(mode, flags, cuda)
        ok = host_ok and moved > 0 and all(map(math.isfinite, norms))
        if mode == "optimizer":
            ok = ok and diff == 0.0  # torch's AdamW on the device, bucket by bucket
        out.append(
            s1.emit(
                {
                    "check": "offload",
                    "mode": mode,
                    "tokens": tokens,
                    "steps": OFFLOAD_STEPS,
                    "dtype": str(learner.dtype).removeprefix("torch."),
                    "max_weight_diff_vs_none": diff,
                    "max_weight_moved": moved,
                    **_against_plan(peak, plan),
                    "planned_host_gib": _gib(plan.host),
                    "step_s": seconds,
                    "grad_norms": norms,
                    **flags,
                    "host_ok": host_ok,
                    "ok": bool(ok),
                }
            )
        )
        del learner, weights
        s1._free(cuda)
    return out


def attention_check(model, args, tokens: int, s1) -> dict:
    """The fallback varlen SDPA against flash-attn's kernel, bf16, when flash-attn imports."""
    import torch

    from microcoder.learner import attention

    cuda = args.device == "cuda"
    if not (cuda and attention.flash_available()):
        why = "flash-attn is not installed here" if cuda else "flash-attn needs CUDA"
        return s1.emit({"check": "attention", "flash_attn": False, "note": why, "ok": True})
    logps, seconds = {}, {}
    for impl in (attention.NAME, "flash_attention_2"):
        learner = s1.learner_for(model, args.device, tokens, attn_implementation=impl)
        _, mb = s1.micro_batch(learner, tokens)
        with torch.no_grad():
            learner._logp(learner.model, mb)  # warm-up
            _sync(cuda)
            t0 = time.perf_counter()
            logps[impl] = learner._logp(learner.model, mb)[0].float().cpu()
            _sync(cuda)
        seconds[impl] = round(time.perf_counter() - t0, 3)
        del learner
        s1._free(cuda)
    diff = (logps[attention.NAME] - logps["flash_attention_2"]).abs()
    return s1.emit(
        {
            "check": "attention",
            "flash_attn": True,
            "tokens": tokens,
            "max_abs_diff": diff.max().item(),
            "mean_abs_diff": diff.mean().item(),
            "forward_s": seconds,
            "ok": diff.mean().item() <= s1.LOGP_MEAN_BF16,
        }
    )


def window_check(folder, args, shape: dict, tokens: int, s1) -> dict:
    """One checkpointed step with a sliding window on every layer, shorter than the sequences:
    the fallback attention's score matrices, counted by the plan, then dominate."""
    from transformers import Qwen2Config

    cuda = args.device == "cuda"
    longest = -(-tokens // 8)
    windowed = {**shape, "use_sliding_window": True, "sliding_window": longest // 2}
    windowed["max_window_layers"] = 0  # every layer windowed
    model = s1.build_model(folder, windowed, tokens)
    config = Qwen2Config(**windowed).to_dict()
    learner = s1.learner_for(
        model, args.device, tokens, attn_implementation="microcoder_varlen",
        activation_checkpointing=True,
    )  # fmt: skip
    _, mb = s1.micro_batch(learner, tokens)
    seconds, norms, peak = _steps(learner, mb, 1, cuda)
    plan = _plan(learner, config, tokens, longest)
    types = getattr(learner.model.config, "layer_types", None) or []
    windowed_layers = sum("sliding" in str(t) for t in types)  # what transformers built
    record = {
        "check": "window",
        "tokens": tokens,
        "sliding_window": windowed["sliding_window"],
        "windowed_layers": windowed_layers,
        "ckpt": True,
        **_against_plan(peak, plan),
        "planned_scores_gib": _gib(plan.attention_scores),
        "step_s": seconds[0],
        "grad_norm": norms[0],
        "ok": plan.attention_scores > 0 and windowed_layers == len(types) > 0 and norms[0] > 0,
    }
    del learner
    s1._free(cuda)
    return s1.emit(record)


def not_runnable(args, s1) -> list[dict]:
    """Sequence parallelism and HSDP need >= 2 GPUs: the gap, one line each."""
    import torch

    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    return [
        s1.emit(
            {
                "check": name,
                "runnable": False,
                "needs_gpus": 2,
                "gpus": gpus,
                "why": why,
                "ok": True,
            }
        )  # fmt: skip
        for name, why in MULTI_GPU.items()
    ]


def scale_checks(model, tmp, args, shape: dict, s1) -> list[dict]:
    """Every check above; `s1` is the gpu_check_stage1 module (its helpers and `emit`)."""
    offload_tokens = 128 if args.small else OFFLOAD_TOKENS
    window_tokens = 256 if args.small else WINDOW_TOKENS
    out = offload_checks(model, args, shape, offload_tokens, s1)
    out.append(attention_check(model, args, offload_tokens, s1))
    out.append(window_check(tmp / "windowed", args, shape, window_tokens, s1))
    return out + not_runnable(args, s1)


def _sync(cuda: bool) -> None:
    import torch

    if cuda:
        torch.cuda.synchronize()


def _gib(n: int | None) -> float | None:
    return None if n is None else round(n / 2**30, 3)


def _against_plan(peak: int | None, plan) -> dict:
    """The measured CUDA peak (None on the CPU) beside the plan's: `peak_gib`,
    `planned_peak_gib`, and `ratio` (measured / planned; None with no measurement)."""
    ratio = peak / plan.peak() if peak else None
    return {
        "peak_gib": _gib(peak),
        "planned_peak_gib": _gib(plan.peak()),
        "ratio": None if ratio is None else round(ratio, 3),
    }

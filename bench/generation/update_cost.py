"""`microcoder bench generation --update-cost`: what one in-flight weight update costs the
sequences it keeps, under each `generator.inflight_kv` ("recompute" and "reuse").

One AsyncEngine (actors/engines/async_llm.py, the generator's engine) on the tiny model. Each trial
starts `capacity` groups of G sequences (one request per sequence, `ignore_eos`, `--max-tokens`
each, seeded prompts of PROMPT_TOKENS), waits until every sequence has sampled half of its
tokens, and runs the generator's own update (actors/weights/publisher.py `update_engine`, pause
"keep", `kv` the mode) with a reload of the model folder (the same load as the streaming bench).
Per trial, with the engine's outputs streamed per step:
  pause_s        pause -> resume (what the generator's `pause_s` records);
  resume_s       resume -> the moment every kept sequence has sampled its next token (p50 and
                 max over the sequences): where "recompute" pays its re-prefill, since vLLM
                 recomputes the preempted requests after the resume, not inside the pause;
  step_s         the median gap between two tokens of one sequence just before the pause (one
                 decode step of the full batch), to read resume_s against;
  reprefill_tokens  the prompt + sampled tokens of the kept sequences at the pause: what
                 "recompute" prefills again ("reuse" prefills nothing).
Modes alternate trial by trial on the one engine (`--pairs` pairs), so a load swing on a shared
machine hits both. The weights reloaded are the same, so the log-probs do not tell the modes
apart here (see docs/architecture.md §7 for what "reuse" changes with new weights).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import uuid

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines.async_llm import build_async_engine
from microcoder.actors.engines.build import WORKER_EXTENSION
from microcoder.actors.weights.publisher import update_engine

PROMPT_TOKENS = 32
MODES = ("recompute", "reuse")


class _Seq:
    """One sequence's outputs: (monotonic time, tokens so far) per engine step."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, int]] = []

    def tokens(self) -> int:
        return self.marks[-1][1] if self.marks else 0


async def _stream(engine, prompt: list[int], params, seq: _Seq) -> None:
    async for out in engine.llm.generate(
        engine.salted({"prompt_token_ids": prompt}), params, uuid.uuid4().hex
    ):
        seq.marks.append((time.monotonic(), len(out.outputs[0].token_ids)))


def _trial(engine, model_path: str, prompts, max_tokens: int, kv: str) -> dict:
    from vllm import SamplingParams

    params = SamplingParams(temperature=1.0, max_tokens=max_tokens, ignore_eos=True)
    seqs = [_Seq() for _ in prompts]

    async def all_of():
        await asyncio.gather(
            *(_stream(engine, p, params, s) for p, s in zip(prompts, seqs, strict=True))
        )

    done = engine.submit(all_of())
    half = max_tokens // 2
    while min(s.tokens() for s in seqs) < half:
        if done.done():
            done.result()
            raise RuntimeError("bench: the sequences ended before the update")
        time.sleep(0.01)
    kept = [s.tokens() for s in seqs]
    gaps = [b[0] - a[0] for s in seqs for a, b in zip(s.marks[-4:-1], s.marks[-3:], strict=True)]

    def load() -> dict:
        engine.collective_rpc("reload_weights", kwargs={"weights_path": model_path})
        engine.collective_rpc("_mc_fix_tied_lm_head")
        return {"version": 1}

    t0 = time.monotonic()
    _, pause_s = update_engine(engine, "keep", load, "bench update-cost", kv=kv)
    t_resume = t0 + pause_s
    done.result(timeout=600)
    firsts = [
        min((t for t, n in s.marks if t >= t_resume and n > k), default=float("nan")) - t_resume
        for s, k in zip(seqs, kept, strict=True)
    ]
    return {
        "kv": kv,
        "sequences": len(seqs),
        "pause_s": pause_s,
        "resume_s_p50": statistics.median(firsts),
        "resume_s_max": max(firsts),
        "step_s": statistics.median(gaps) if gaps else 0.0,
        "reprefill_tokens": sum(PROMPT_TOKENS + k for k in kept) if kv == "recompute" else 0,
        "tokens_at_pause_mean": statistics.mean(kept),
    }


def run_update_cost(args, model_path: str, device: str) -> dict:
    """Build the engine, warm it, then `args.pairs` trials of each mode, alternating."""
    from transformers import AutoConfig

    from microcoder.bench.generation.workload import prompt_token_ids

    vocab = AutoConfig.from_pretrained(model_path).vocab_size
    n = args.capacity * args.group_size
    prompts = prompt_token_ids(n, PROMPT_TOKENS, vocab, seed=args.seed)
    cfg = GeneratorConfig(
        max_response_tokens=args.max_tokens,
        max_prompt_tokens=PROMPT_TOKENS,
        max_inflight_prompts=n,
        kv_cache_gib=2.0,
    )
    engine = build_async_engine(
        model_path, cfg, device, seed=0, worker_extension_cls=WORKER_EXTENSION
    )
    trials = []
    try:
        _trial(engine, model_path, prompts[:4], 16, "recompute")  # warm-up
        for i in range(args.pairs):
            for kv in MODES if i % 2 == 0 else MODES[::-1]:
                trials.append(_trial(engine, model_path, prompts, args.max_tokens, kv))
                print(f"update-cost trial: {json.dumps(trials[-1])}", file=sys.stderr, flush=True)
    finally:
        engine.shutdown()
    by = {
        kv: {
            key: statistics.median(t[key] for t in trials if t["kv"] == kv)
            for key in ("pause_s", "resume_s_p50", "resume_s_max", "step_s", "reprefill_tokens")
        }
        for kv in MODES
    }
    return {
        "workload": {
            "kind": "update-cost",
            "sequences": n,
            "max_tokens": args.max_tokens,
            "prompt_tokens": PROMPT_TOKENS,
            "pairs": args.pairs,
            "device": device,
        },
        "modes": by,
        "trials": trials,
    }


def format_update_cost(result: dict) -> str:
    w = result["workload"]
    rows = []
    rows.append(
        f"generation --update-cost: {w['sequences']} sequences in flight, {w['max_tokens']} "
        f"tokens each, update at half, {w['device']}, median of {w['pairs']} per mode"
    )
    rows.append(f"{'inflight_kv':12}{'pause_s':>9}{'resume p50':>12}{'resume max':>12}")
    for kv, m in result["modes"].items():
        rows.append(
            f"{kv:12}{m['pause_s']:>9.3f}{m['resume_s_p50']:>12.3f}{m['resume_s_max']:>12.3f}"
            f"   step {m['step_s']:.3f} s, re-prefilled {m['reprefill_tokens']:.0f} tokens"
        )
    return "\n".join(rows)

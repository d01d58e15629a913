"""`microcoder bench eval`: is `microcoder eval` really pipelined?

One run, one cluster (local Ray, G tiny-model vLLM generators, E executors), the same problems
and settings for three timed phases, after a warm-up:
  generate-only: the engine's generation calls (same chunking and calls in flight), no judging;
  pipelined:     the whole evaluation (`evaluate`), judging while generation goes on;
  judge-only:    the pipelined phase's own samples (their extracted programs, from its
                 samples.jsonl) judged alone, as `--generations` does.
overlap = pipelined wall / max(generate-only, judge-only): 1.0 = judging hidden entirely behind
generation (or the reverse); (generate + judge) / max(...) = no overlap at all. Goal <= 1.15.
The generate-only and pipelined phases draw fresh samples of the same distribution (same
problems, n, T, budget); judge-only judges exactly the pipelined phase's programs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from microcoder.bench.model_folder import add_model_argument, model_folder
from microcoder.launch.cliargs import add_actor_counts, add_set_argument

DESCRIPTION = (
    "microcoder eval: pipelined wall vs generate-only and judge-only (goal overlap <= 1.15)"
)
USUAL_MODELS = ("runs/tiny-model-warm", "runs/tiny-model")
"""Where the bench looks for a model without --model (the warm-started one first)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_argument(p, USUAL_MODELS)
    p.add_argument("--problems", type=int, default=240, help="synthetic held-out problems (240)")
    p.add_argument("--samples", type=int, default=4, help="samples per problem (4)")
    p.add_argument("--max-tokens", type=int, default=96, help="budget in new tokens (96)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (1.0)")
    add_actor_counts(p)
    p.add_argument("--workers", type=int, default=1, help="sandbox workers per executor (1)")
    p.add_argument("--sequences-per-call", type=int, default=64, help="per generator call (64)")
    p.add_argument("--device", default="cpu", help="cluster.device: auto | cpu | cuda (cpu)")
    add_set_argument(p, help="extra config override (repeatable)")


def _timed(fn) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _config(args, model: str):
    """The run config of the measured actors: this model and device, the bench's token budget and
    sandbox workers, then the `--set` overrides."""
    from microcoder.launch.config import load_config

    return load_config(
        None,
        [
            f'model.path="{model}"',
            f"cluster.device={args.device}",
            f"generator.max_response_tokens={args.max_tokens}",
            "generator.max_prompt_tokens=512",
            f"executor.workers={args.workers}",
            *args.overrides,
        ],
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from microcoder.data.prompting.render import PromptRenderer
    from microcoder.data.synthetic.tasks import generate_tasks
    from microcoder.evaluation.engine import evaluate, generate_only
    from microcoder.evaluation.generations import Generation
    from microcoder.evaluation.samples import read_samples
    from microcoder.evaluation.settings import EvalSettings
    from microcoder.launch.jobs.eval_cluster import EvalCluster

    tmp = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    model = model_folder(args.model, USUAL_MODELS, tmp)
    cfg = _config(args, model)
    problems = generate_tasks(0, split="heldout")[: args.problems]
    settings = EvalSettings(
        samples=args.samples,
        ks=[1],
        budgets=[args.max_tokens],
        temperature=args.temperature,
        top_p=1.0,
        sequences_per_call=args.sequences_per_call,
        progress_every_s=1e9,
    )
    renderer = PromptRenderer(
        AutoTokenizer.from_pretrained(model), cfg.prompt, cfg.model.chat_template_kwargs
    )
    texts = {p.id: renderer.text(p) for p in problems}
    cluster = EvalCluster(cfg, tmp, "local")
    try:
        cluster.start(model, args.generators, args.executors, log=lambda m: None)
        gens = cluster.generators
        execs = cluster.executors
        warm = EvalSettings(**{**settings.to_dict(), "samples": 1})
        cluster.evaluate(problems[:8], warm, None, texts)
        samples, gen_s = _timed(
            lambda: generate_only(problems, settings, gens, lambda p: texts[p.id])
        )
        report, eval_s = _timed(lambda: cluster.evaluate(problems, settings, tmp / "eval", texts))
        records, _ = read_samples(tmp / "eval" / "samples.jsonl")
        given = [Generation(r.problem_id, r.sample_index, r.code, 0) for r in records]
        judged, judge_s = _timed(
            lambda: evaluate(problems, settings, [], execs, None, generations=given)
        )
    finally:
        cluster.close()
    n = len(problems) * args.samples
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "model": model,
        "problems": len(problems),
        "samples_per_problem": args.samples,
        "samples": n,
        "max_tokens": args.max_tokens,
        "generators": args.generators,
        "executors": args.executors,
        "sandbox_workers": args.workers,
        "load_start": os.getloadavg()[0],
        "eval_wall_s": eval_s,
        "generate_only_s": gen_s,
        "judge_only_s": judge_s,
        "overlap": eval_s / max(gen_s, judge_s),
        "no_overlap_ratio": (gen_s + judge_s) / max(gen_s, judge_s),
        "samples_per_s": n / eval_s,
        "generated_tokens": report["counts"]["generated_tokens"],
        "generate_only_tokens": sum(s["tokens"] for _, _, s in samples),
        "judged_programs": report["counts"]["judged_programs"],
        "judge_only_programs": judged["counts"]["judged_programs"],
        "first_sample_s": report["timing"]["first_sample_s"],
        "pass_at_1": report["pass_at_k"]["1"],
        "verdicts": report["verdicts"],
    }


def format_table(r: dict[str, Any]) -> str:
    lines = [
        f"microcoder bench eval ({r['date']}, {r['cpus']} CPUs, load {r['load_start']:.1f}): "
        f"{r['problems']} problems x {r['samples_per_problem']} samples, max_tokens "
        f"{r['max_tokens']}, {r['generators']} generator(s), {r['executors']} executor(s) x "
        f"{r['sandbox_workers']} sandbox worker(s)",
        f"  model {r['model']}",
        f"  {'phase':<16} {'seconds':>8} {'work':>28}",
        f"  {'generate-only':<16} {r['generate_only_s']:>8.2f} "
        f"{str(r['generate_only_tokens']) + ' tokens':>28}",
        f"  {'judge-only':<16} {r['judge_only_s']:>8.2f} "
        f"{str(r['judge_only_programs']) + ' programs':>28}",
        f"  {'pipelined eval':<16} {r['eval_wall_s']:>8.2f} "
        f"{str(r['generated_tokens']) + ' tokens, ' + str(r['judged_programs']) + ' programs':>28}",
        f"  overlap = eval / max(generate, judge) = {r['overlap']:.3f} (goal <= 1.15; no overlap "
        f"at all would be {r['no_overlap_ratio']:.3f})",
        f"  {r['samples_per_s']:.1f} samples/s; first sample after {r['first_sample_s']:.2f} s; "
        f"verdicts {r['verdicts']}",
    ]
    return "\n".join(lines)

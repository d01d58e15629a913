"""The measure step of `microcoder data filter`: K samples per problem through the eval path
(launch/jobs/eval_cluster.py's actors, microcoder.evaluation.engine.evaluate), pass rates appended to
the rates file after each chunk of problems. See launch/jobs/data_filter.py."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from microcoder.data.difficulty.rates import PassRate, append_rates
from microcoder.data.problem import Problem
from microcoder.evaluation.progress import ProgressLine
from microcoder.evaluation.report import per_problem_counts
from microcoder.evaluation.samples import read_samples
from microcoder.evaluation.settings import EvalSettings
from microcoder.launch.config import load_config
from microcoder.launch.jobs.data_filter import check_work_dir, log, work_dir
from microcoder.launch.jobs.eval_cluster import EvalCluster
from microcoder.launch.jobs.eval_inputs import render_prompts


def measure(args: argparse.Namespace, todo: Sequence[Problem], identity: dict) -> int:
    """Measure `todo`; returns the number of problems whose rate was appended."""

    cfg = load_config(args.config, args.overrides)
    folder = work_dir(args.rates)
    check_work_dir(folder, identity)
    texts = _prompts(args, cfg, todo)
    kept = [p for p in todo if p.id in texts]
    if not kept:
        return 0

    cluster = EvalCluster(cfg, folder, args.address or cfg.cluster.address)
    written = 0
    try:
        cluster.start(args.model, args.generators, args.executors, log=log)
        for start in range(0, len(kept), max(1, args.chunk)):
            chunk = kept[start : start + max(1, args.chunk)]
            progress = ProgressLine()
            rates = measure_chunk(
                args, cluster, chunk, texts, identity, progress, cfg.prompt.reasoning
            )
            progress.close()
            append_rates(args.rates, rates)
            written += len(rates)
            log(f"measured {start + len(chunk)}/{len(kept)} problems -> {args.rates}")
    except KeyboardInterrupt:
        log(f"interrupted; {written} rates are in {args.rates}: rerun the same command to go on")
        raise
    finally:
        cluster.close()
    return written


def measure_chunk(
    args: argparse.Namespace,
    cluster,
    chunk: Sequence[Problem],
    texts: dict,
    identity: dict,
    progress=None,
    reasoning: str = "auto",
) -> list[PassRate]:
    """One `evaluate` call over `chunk` (resuming the work folder's samples, reporting to
    `progress`, e.g. evaluation/progress.py's ProgressLine); the rates. `reasoning`: the
    resolved `prompt.reasoning` (render_prompts resolved it)."""

    folder = work_dir(args.rates)
    settings = EvalSettings(
        samples=args.samples,
        ks=[1],
        budgets=[args.max_tokens],
        temperature=args.temperature,
        top_p=args.top_p,
        resume=True,
        label="measure",
        reasoning=reasoning,
    )
    cluster.evaluate(
        chunk, settings, folder, texts, progress=progress, context={"data_filter": identity}
    )
    records, _ = read_samples(folder / "samples.jsonl")
    ids = {p.id for p in chunk}
    mine = [r for r in records if r.problem_id in ids and r.sample_index < args.samples]
    counts = per_problem_counts(mine, args.max_tokens)
    return [
        PassRate(p.id, counts[p.id][1], counts[p.id][0], **identity)
        for p in chunk
        if p.id in counts
    ]


def _prompts(args: argparse.Namespace, cfg, todo: Sequence[Problem]) -> dict[str, str]:
    """{id: rendered prompt} of the problems whose prompt fits --max-prompt-tokens."""

    measured = render_prompts(args.model, cfg, todo, args.max_prompt_tokens, args.max_tokens)
    if measured.skipped:
        first = measured.skipped[0]
        log(
            f"{len(measured.skipped)} prompt(s) over {args.max_prompt_tokens} tokens are not "
            f"measured (e.g. {first.problem.id!r}, {first.tokens} tokens); raise "
            "--max-prompt-tokens to keep them"
        )
    return {m.problem.id: m.text for m in measured.kept}

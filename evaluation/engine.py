"""`evaluate(...)`: one evaluation on live Generator / Executor actor handles, CLI-free.

    report = evaluate(problems, settings, generators, executors, out_dir=None,
                      renderer_text=renderer.text, progress=None, generations=None, context=None)

- `problems`: the Problem records to evaluate (already selected, prompts already measured).
- `generators` / `executors`: Ray handles of actors/generator.py / actors/executor.py, as a
  list (named generator-i / executor-i) or a {name: handle} dict. Generators need
  `sample_eval`, executors `add_problems` + `judge_samples` (+ `score_replies` for `answer`
  problems, scored by the reward function); the problems are registered on the
  executors here. A training run passes its live pools (their loops keep running).
- `renderer_text(problem) -> str`: the fully rendered prompt (data/prompting/render.py
  `PromptRenderer.text`); needed unless `generations` is given.
- `generations`: precomputed samples (evaluation/generations.py) judged without a model.
- `out_dir`: where samples.jsonl, report.json and report.md go; None = nothing written.
- `context`: extra report.json fields (settings of the caller, selection, skipped prompts).

Budgets: each sample is generated once at max(settings.budgets) and cut to each smaller budget
(evaluation/budgets.py). The report is evaluation/report.py's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from microcoder.data.problem import Problem
from microcoder.evaluation.budgets import check_budgets
from microcoder.evaluation.driver import Driver, PendingSample
from microcoder.evaluation.generations import Generation
from microcoder.evaluation.plan import plan_samples
from microcoder.evaluation.report import build_report
from microcoder.evaluation.report_md import render_markdown
from microcoder.evaluation.samples import SampleRecord, SamplesWriter, read_samples
from microcoder.evaluation.settings import EvalError, EvalSettings


def named(handles, kind: str) -> list[tuple[str, Any]]:
    """[(name, handle)] from a list (named kind-i) or a {name: handle} mapping."""
    if isinstance(handles, Mapping):
        return list(handles.items())
    return [(f"{kind}-{i}", h) for i, h in enumerate(handles or [])]


def register_problems(executors: Sequence[tuple[str, Any]], problems, timeout_s: float) -> int:
    """Send the problems to every executor once (one object in the store); their sandbox pool
    size (the smallest) is returned, for sizing judge calls."""
    import ray

    ref = ray.put(list(problems))
    calls = {name: (h.add_problems.remote(ref), h.ready.remote()) for name, h in executors}
    workers = []
    for name, (added, ready) in calls.items():
        try:
            ray.get(added, timeout=timeout_s)
            workers.append(int(ray.get(ready, timeout=timeout_s).get("workers", 1)))
        except Exception as err:  # named with the remedy
            raise EvalError(
                f"{name} could not take the problems: {str(err).splitlines()[-1]}; see its log "
                "(logs/<actor>.log); is the sandbox available (`microcoder judge`)?"
            ) from err
    return min(workers, default=1)


def _load_resume(out: Path | None, settings: EvalSettings) -> tuple[list[SampleRecord], int | None]:
    if out is None or not settings.resume or not (out / "samples.jsonl").exists():
        return [], None
    return read_samples(out / "samples.jsonl")


def evaluate(
    problems: Sequence[Problem],
    settings: EvalSettings,
    generators=(),
    executors=(),
    out_dir: str | Path | None = None,
    renderer_text: Callable[[Problem], str] | None = None,
    progress: Callable[[dict], None] | None = None,
    generations: Sequence[Generation] | None = None,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate and return the report dict (see module doc); writes out_dir's files if given."""
    t0 = time.monotonic()
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise EvalError("problem ids must be unique in an evaluation")
    if not problems:
        raise EvalError("no problems to evaluate (check the filters and the problem file)")
    budgets: list[int | None] = (
        [None] if generations is not None else check_budgets(settings.budgets)
    )
    gens, execs = _actors(generators, executors, generations is None, renderer_text)
    out = Path(out_dir) if out_dir is not None else None
    old, keep = _load_resume(out, settings)
    wanted = set(ids)
    old = [r for r in old if r.problem_id in wanted and r.max_tokens in budgets]
    if generations is None:
        old = [r for r in old if r.sample_index < settings.samples]
    done = {r.key for r in old}
    records: list[SampleRecord] = list(old)
    cache = {(r.problem_id, r.code): _as_verdict(r) for r in old if r.code is not None}
    writer = SamplesWriter(out / "samples.jsonl", keep) if out is not None else None

    def on_sample(recs: list[SampleRecord]) -> None:
        records.extend(recs)
        if writer is not None:
            writer.append(recs)

    if generations is not None:
        problems, context = _with_generations(problems, generations, old, context)
    by_id = {p.id: p for p in problems}
    if generations is None:
        todos = plan_samples(problems, settings.samples, budgets, done)
        given = []
        total = sum(len(t.sample_indices) for t in todos)
    else:
        todos = []
        given = _given_samples(generations, by_id, done)
        total = len(given)
    try:
        workers = register_problems(execs, problems, settings.call_timeout_s)
        batch = settings.judge_batch or max(8, 2 * workers)
        driver = Driver(
            settings,
            gens,
            execs,
            on_sample,
            progress,
            total,
            cache if settings.reuse_verdicts else None,
            batch,
        )
        driver.run(todos, renderer_text, given)
    finally:
        if writer is not None:
            writer.close()
    full_context = {
        "settings": settings.to_dict(),
        **(context or {}),
        **_timing_and_counts(driver, t0, resumed=len(old)),
    }
    report = build_report(problems, records, settings.ks, budgets, full_context)
    if out is not None:
        write_report(out, report)
    return report


def _actors(generators, executors, generating: bool, renderer_text) -> tuple[list, list]:
    """The named generators and executors; an evaluation needs an executor, and generating needs
    generators and `renderer_text`."""
    gens = named(generators, "generator")
    execs = named(executors, "executor")
    if not execs:
        raise EvalError("an evaluation needs at least one executor (--executors 1)")
    if generating and (not gens or renderer_text is None):
        raise EvalError("generating needs generators and renderer_text (or pass generations)")
    return gens, execs


def _with_generations(
    problems: Sequence[Problem], generations: Sequence[Generation], old: list, context
) -> tuple[list[Problem], dict[str, Any]]:
    """The problems that have a generation (given or resumed), and the context naming the
    others (`problems_without_generations`)."""
    have = {g.problem_id for g in generations} | {r.problem_id for r in old}
    lacking = [p.id for p in problems if p.id not in have]
    problems = [p for p in problems if p.id in have]
    context = {
        **(context or {}),
        "problems_without_generations": {"count": len(lacking), "ids": lacking},
    }
    if not problems:
        raise EvalError("no selected problem has a generation in the generations file")
    return problems, context


def _given_samples(
    generations: Sequence[Generation], by_id: dict[str, Problem], done: set
) -> list[PendingSample]:
    """The precomputed generations to judge: those of selected problems not judged already."""
    return [
        PendingSample(
            by_id[g.problem_id],
            g.sample_index,
            [
                {
                    "max_tokens": None,
                    "code": g.code,
                    "tokens": None,
                    "finish_reason": None,
                    "unfinished": g.unfinished,
                }
            ],
        )
        for g in generations
        if g.problem_id in by_id and (g.problem_id, g.sample_index, None) not in done
    ]


def _timing_and_counts(driver: Driver, t0: float, resumed: int) -> dict[str, dict]:
    """The report's `timing` (since `t0`) and `counts` (`resumed` records read back)."""
    stats = driver.stats
    timing = {
        "wall_s": time.monotonic() - t0,
        "first_sample_s": stats.first_sample_s,
        "samples_per_s": driver.done / max(time.monotonic() - t0, 1e-9),
    }
    counts = {
        "resumed_records": resumed,
        "generated_samples": stats.generated,
        "generated_tokens": stats.tokens,
        "judged_programs": stats.judged,
        "reused_verdicts": stats.reused,
        "generate_calls": stats.generate_calls,
        "judge_calls": stats.judge_calls,
        "policy_versions": sorted(v for v in stats.policy_versions if v is not None),
    }
    return {"timing": timing, "counts": counts}


def write_report(out: Path, report: dict[str, Any]) -> None:
    """report.json and report.md into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (out / "report.md").write_text(render_markdown(report))


def _as_verdict(r: SampleRecord) -> dict[str, Any]:
    return {
        "verdict": r.verdict,
        "passed": r.passed,
        "tests_passed": r.tests_passed,
        "first_failed": r.first_failed,
        "message": r.message,
    }


def generate_only(
    problems: Sequence[Problem],
    settings: EvalSettings,
    generators,
    renderer_text: Callable[[Problem], str],
    progress: Callable[[dict], None] | None = None,
) -> list[tuple[str, int, dict[str, Any]]]:
    """Generate like `evaluate` (same calls, same chunking) without judging: [(problem_id,
    sample_index, sample)] with each sample's "views" per budget (`microcoder bench eval`)."""
    budgets = check_budgets(settings.budgets)
    gens = named(generators, "generator")
    if not gens:
        raise EvalError("generating needs at least one generator")
    todos = plan_samples(problems, settings.samples, budgets, set())
    total = sum(len(t.sample_indices) for t in todos)
    driver = Driver(settings, gens, [], lambda _: None, progress, total)
    return driver.run(todos, renderer_text, judge=False)

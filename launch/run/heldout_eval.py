"""Held-out evaluation during a run, through the same code path as `microcoder eval`
(microcoder.evaluation.evaluate) on the run's live generator and executor pools: programs are
judged in the sandbox, replies to `answer` problems scored by the run's reward function
(`executor.reward`, `Executor.score_replies`), as training scores them.

Two evaluations at each point: the sampled pass@1 (eval.samples per problem at eval.temperature
and eval.top_p) and the greedy pass rate (one sample at T = 0), both with eval.max_tokens new
tokens. Their report.json, report.md and samples.jsonl go to RUN_DIR/evals/step_N/{sampled,
greedy}/; the figures go to metrics.jsonl as an `eval` record (dashboard, Prometheus, the final
table): heldout_pass_rate, heldout_greedy_pass_rate, their timings, and the sampled report's
by-group rows, and the policy version the eval sampled at (`policy_version`: the version the
generators held, launch/run/eval_beside.py, when the eval runs beside training; else the newest one
its samples came from) with every version seen (`policy_versions_seen`), and when it `started`
(unix seconds; the record's `time` is its end).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from microcoder.evaluation.engine import evaluate as run_eval
from microcoder.evaluation.settings import EvalSettings

if TYPE_CHECKING:  # cluster.py's circle: its modules import Run for the annotations only
    from microcoder.launch.run.cluster import Run

MODES = (("sampled", "heldout_pass_rate"), ("greedy", "heldout_greedy_pass_rate"))


def settings_for(run: Run, mode: str):
    """The EvalSettings of one of MODES under the run's `[eval]`."""

    ev = run.cfg.eval
    greedy = mode == "greedy"
    return EvalSettings(
        samples=1 if greedy else ev.samples,
        ks=[1],
        budgets=[ev.max_tokens],
        temperature=0.0 if greedy else ev.temperature,
        top_p=1.0 if greedy else ev.top_p,
        progress_every_s=1e9,  # the run prints one line per evaluation instead
        reasoning=run.reasoning,  # extraction as in training
    )


def evaluate(
    run: Run, step: int, generators=None, held_version: int | None = None
) -> dict[str, Any] | None:
    """Both pass rates at `step`, logged as an `eval` record; None when there is no held-out set.
    `generators`: the ones to sample on ({name: handle}; default the whole pool), which hold
    `held_version` when given (launch/run/eval_beside.py)."""

    held = run.problems.heldout if run.problems is not None else []
    if not held:
        return None
    texts = run.problems.heldout_texts
    fields: dict[str, Any] = {"step": step, "heldout_problems": len(held), "started": time.time()}
    seen: set[int] = set()
    for mode, key in MODES:
        report = run_eval(
            held,
            settings_for(run, mode),
            generators if generators is not None else run.generators.handles(),
            run.executors.handles(),
            out_dir=run.run_dir / "evals" / f"step_{step}" / mode,
            renderer_text=lambda p: texts[p.id],
            context={"step": step, "mode": mode},
        )
        timing = report["timing"]
        fields[key] = report["pass_at_k"]["1"]
        fields[f"{key}_wall_s"] = timing["wall_s"]
        seen.update(report["counts"]["policy_versions"])
        if mode == "sampled":
            fields["heldout_by_group"] = report["by_group"]
            fields["heldout_truncation_rate"] = report["by_budget"][-1]["truncation_rate"]
    if isinstance(generators, dict):  # the held ones, by name (eval-generator-*: set aside)
        fields["eval_generators"] = sorted(generators)
    fields["policy_versions_seen"] = sorted(seen)
    fields["policy_version"] = held_version if held_version is not None else max(seen, default=None)
    mixed = held_version is not None and seen != {held_version}
    run.log(
        f"eval at step {step} (policy version {fields['policy_version']}"
        + (f"; samples came from versions {sorted(seen)}" if mixed else "")
        + f"): held-out pass@1 {fields['heldout_pass_rate']:.3f} "
        f"(T={run.cfg.eval.temperature:g}, {run.cfg.eval.samples} sample(s) per problem), greedy "
        f"{fields['heldout_greedy_pass_rate']:.3f} on {len(held)} problems "
        f"({run.run_dir / 'evals' / f'step_{step}'})"
    )
    return run.metrics.log("eval", **fields)

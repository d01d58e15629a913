"""The body of `microcoder eval` (launch/cli/cmd_eval.py parses the options, launch/jobs/eval_inputs.py
checks them): the root config, the prompts, the actors (launch/jobs/eval_cluster.py), then the
engine of microcoder.evaluation (evaluation/engine.py: `evaluate`). It lives in launch/ because
it reads the root config and brings up Ray; the evaluation itself stays in evaluation/."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from microcoder.data.problem import JUDGED_KINDS, ProblemFormatError
from microcoder.evaluation.budgets import check_budgets
from microcoder.evaluation.generations import read_generations
from microcoder.evaluation.passk import usable_ks
from microcoder.evaluation.progress import ProgressLine
from microcoder.evaluation.report_md import group_table
from microcoder.evaluation.settings import EvalError, EvalSettings
from microcoder.launch.config import load_config
from microcoder.launch.jobs.eval_cluster import EvalCluster
from microcoder.launch.jobs.eval_inputs import (
    check_resume,
    int_list,
    load_selected,
    out_folder,
    render_prompts,
    warn,
)

DEFAULT_PROMPT_TOKENS = 4096


def _fail(msg: str) -> int:
    print(f"microcoder eval: {msg}", file=sys.stderr)
    return 2


def run_eval(args) -> int:
    try:
        return _run(args)
    except (ValueError, ProblemFormatError, FileNotFoundError) as err:
        return _fail(str(err))
    except EvalError as err:
        out = f" (output so far: {args.out})" if getattr(args, "out", None) else ""
        return _fail(f"{err}{out}")


def _settings(args, cfg):
    if args.sequences_per_call < 1:
        raise ValueError("--sequences-per-call must be >= 1")
    if args.samples < 1:
        raise ValueError(f"--samples {args.samples}: need at least 1")
    if args.temperature < 0 or not 0 < args.top_p <= 1:
        raise ValueError("--temperature must be >= 0 and --top-p in (0, 1]")
    turns = getattr(args, "max_turns", 1)
    budgets = check_budgets(int_list(args.max_tokens, "--max-tokens"))
    if turns != 1:  # 0 or less is refused there, with the range
        _multi_turn(args, cfg, turns)
        if len(budgets) > 1:
            warn(
                f"--max-turns {turns}: each turn is capped at the largest --max-tokens "
                f"({budgets[-1]}); the smaller budgets are not reported"
            )
            budgets = budgets[-1:]
    return EvalSettings(
        samples=args.samples,
        ks=int_list(args.k, "--k"),
        budgets=budgets,
        max_turns=turns,
        temperature=args.temperature,
        top_p=args.top_p,
        call_timeout_s=args.timeout,
        sequences_per_call=args.sequences_per_call,
        resume=args.resume,
        reasoning=cfg.prompt.reasoning,  # `auto` is resolved once the model's tokenizer is read
    )


def _multi_turn(args, cfg, turns: int) -> None:
    """`--max-turns N`: the generators run the config's multi-turn environment (`repair` when
    environment.kind is `single`) with N turns; refused with --generations (no model)."""
    if args.generations:
        raise ValueError("--max-turns samples trajectories with a model; drop --generations")
    env = cfg.environment
    kind = "repair" if env.kind == "single" else env.kind
    try:
        cfg.environment = type(env).model_validate(
            {**env.model_dump(), "kind": kind, "max_turns": turns}
        )
    except ValueError:  # pydantic's ValidationError: the range of max_turns
        raise ValueError(f"--max-turns {turns}: must be between 1 and 16") from None


def _drop_ks(settings, samples: int) -> None:
    """Warn about k values above the samples (the report leaves them out, in `dropped_k`)."""

    usable, dropped = usable_ks(settings.ks, samples)
    if dropped:
        warn(
            f"pass@k for k = {dropped} needs more than {samples} samples per problem; dropped "
            f"(raise --samples to {max(dropped)} to get them)"
        )
    if not usable:
        raise ValueError(f"no --k value is <= the {samples} samples per problem; lower --k")


def _run(args) -> int:
    cfg = load_config(args.config, args.overrides)
    settings = _settings(args, cfg)
    all_problems, problems, selection = load_selected(args)
    out = out_folder(args)
    args.out = str(out)
    identity: dict[str, Any] = {
        "model": str(Path(args.model).resolve()) if args.model and not args.generations else None,
        "problems_file": str(Path(args.problems).resolve()),
        "generations_file": str(Path(args.generations).resolve()) if args.generations else None,
        "temperature": None if args.generations else settings.temperature,
        "top_p": None if args.generations else settings.top_p,
        "prompt": None if args.generations else cfg.prompt.model_dump(mode="json"),
        "chat_template_kwargs": None if args.generations else cfg.model.chat_template_kwargs,
        "multi_turn": (
            {"kind": cfg.environment.kind, "max_turns": settings.max_turns}
            if settings.max_turns > 1
            else None
        ),
    }
    if args.resume:
        check_resume(out, identity)
    context: dict[str, Any] = {"selection": selection}
    generations = None
    texts = {}
    if args.generations:
        generations, problems = _given(args, all_problems, problems, settings)
    else:
        problems, texts = _prompts(args, cfg, problems, settings, context)
    (out / "settings.json").write_text(
        json.dumps({**settings.to_dict(), **identity, "selection": selection}, indent=2) + "\n"
    )
    context["settings"] = {**settings.to_dict(), **identity}
    return _evaluate(args, cfg, out, problems, settings, generations, texts, context)


def _given(args, all_problems, problems, settings):
    gens = read_generations(
        args.generations,
        {p.id for p in all_problems},
        settings.reasoning,
        replies={p.id for p in all_problems if p.kind not in JUDGED_KINDS},
        languages={p.id: p.language for p in all_problems},
    )
    wanted = {p.id for p in problems}
    per = Counter(g.problem_id for g in gens if g.problem_id in wanted)
    lacking = [p.id for p in problems if not per[p.id]]
    if lacking:
        warn(
            f"{len(lacking)} selected problem(s) have no generation and are left out "
            f"(e.g. {lacking[0]!r}); listed in report.json problems_without_generations"
        )
    if not per:
        raise ValueError(f"{args.generations}: no generation for any selected problem")
    lo = min(per.values())
    hi = max(per.values())
    if lo != hi:
        warn(
            f"problems have {lo} to {hi} generations; samples_per_problem = {lo} (each problem's "
            "pass@k uses all of its own)"
        )
    _drop_ks(settings, lo)
    print(
        f"microcoder eval: judging {sum(per.values())} given samples of {len(per)} problems",
        file=sys.stderr,
    )
    return gens, [p for p in problems if per[p.id]]


def _prompts(args, cfg, problems, settings, context):
    limit = args.max_prompt_tokens or DEFAULT_PROMPT_TOKENS
    _drop_ks(settings, settings.samples)
    measured = render_prompts(args.model, cfg, problems, limit, settings.budgets[-1])
    settings.reasoning = cfg.prompt.reasoning  # resolved for the model by render_prompts
    skipped = [{"problem_id": m.problem.id, "tokens": m.tokens} for m in measured.skipped]
    context["skipped_prompts"] = {"count": len(skipped), "max_prompt_tokens": limit, "ids": skipped}
    if skipped:
        warn(
            f"{len(skipped)} prompt(s) are over {limit} tokens and are skipped (e.g. "
            f"{skipped[0]['problem_id']!r}, {skipped[0]['tokens']} tokens); raise "
            "--max-prompt-tokens to keep them"
        )
    if not measured.kept:
        raise ValueError(
            "every selected prompt is over the prompt limit; raise --max-prompt-tokens"
        )
    return [m.problem for m in measured.kept], {m.problem.id: m.text for m in measured.kept}


def _evaluate(args, cfg, out, problems, settings, generations, texts, context) -> int:
    address = args.address or cfg.cluster.address
    cluster = EvalCluster(cfg, out, address)
    progress = None if args.quiet else ProgressLine()
    try:
        cluster.start(
            None if generations else args.model,
            args.generators,
            args.executors,
            log=lambda m: print(f"microcoder eval: {m}", file=sys.stderr),
        )
        report = cluster.evaluate(
            problems,
            settings,
            out,
            texts,
            progress=progress,
            generations=generations,
            context=context,
        )
    except KeyboardInterrupt:
        print(
            f"\nmicrocoder eval: interrupted; finished samples are in {out}/samples.jsonl: "
            "rerun with --resume --out " + str(out),
            file=sys.stderr,
        )
        raise
    finally:
        if progress is not None:
            progress.close()
        cluster.close()
    print("\n".join(group_table(report)))
    t = report["timing"]
    print(
        f"\n{report['problems']} problems x {report['samples_per_problem']} samples, pass@"
        f"{report['k'][0]} = {100 * (report['pass_at_k'][str(report['k'][0])] or 0):.1f}% at "
        f"max_tokens {report['max_tokens'] or 'given'}; {t['wall_s']:.1f} s"
    )
    if report.get("by_turn"):
        k = str(report["k"][0])
        after = ", ".join(
            f"turn {t['turn']} {100 * (t['pass_at_k'][k] or 0):.1f}%" for t in report["by_turn"]
        )
        print(f"pass@{k} after each turn ({report['max_turns']} turns at most): {after}")
    print(f"report: {out / 'report.md'}, {out / 'report.json'}; samples: {out / 'samples.jsonl'}")
    return 0

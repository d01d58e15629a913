"""`microcoder prompts show DATA [--config C] [--set k=v] [--format F] [--n N] [--json]`.

Renders problems exactly as a run would (the run's `[prompt]` template and system prompts,
`model.chat_template_kwargs`, the tokenizer of `model.path`) and prints them with their token
counts, plus how many prompts exceed `generator.max_prompt_tokens` (a run skips those).
`--json`: one line per problem, `{"problem_id", "text", "tokens"}`; the summary goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys

from microcoder.launch.cliargs import add_format_argument, add_set_argument

TEXT_DEFAULT_N = 3
"""Prompts printed in text mode when --n is not given (--json prints all)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompts", help="show problems rendered as the model sees them")
    psub = p.add_subparsers(dest="prompts_command", metavar="ACTION", required=True)
    show = psub.add_parser(
        "show",
        help="print rendered prompts with their token counts under the run's tokenizer",
        description="Render the problems of DATA with the run's prompt template and tokenizer "
        "and print them with their token counts and how many exceed generator.max_prompt_tokens.",
    )
    show.add_argument("data", help="problem file (our JSONL or any loader format, optionally .gz)")
    show.add_argument("--config", help="TOML recipe whose [prompt], [model], [generator] are used")
    add_set_argument(show, "prompt.template=lcb")
    add_format_argument(show)
    show.add_argument(
        "--n",
        type=int,
        default=None,
        help=f"prompts to print (default {TEXT_DEFAULT_N}; with --json: all)",
    )
    show.add_argument("--json", action="store_true", help="one JSON line per problem")
    show.set_defaults(func=run_show)


def _fail(message: str) -> int:
    print(f"microcoder prompts: {message}", file=sys.stderr)
    return 2


def _load(path: str, fmt: str):
    """(problems, error message or None); bad rows are reported on stderr and left out."""
    from microcoder.data.formats.loaders import FORMATS, load_problems

    try:
        result = load_problems(path, fmt, strict=False)
    except FileNotFoundError:
        return [], f"{path}: no such problem file; give the path of a JSONL/JSON(.gz) problem file"
    except ValueError as e:  # unrecognised rows (ProblemFormatError) or an unknown --format
        return [], f"{e} (choose the loader with --format)"
    if result.rejects:
        first = result.rejects[0]
        print(
            f"prompts: left out {len(result.rejects)} bad rows (first: {first.source}:"
            f"{first.line}: {first.field}: {first.reason})",
            file=sys.stderr,
        )
    if not result.problems:
        return [], (
            f"{path}: no loadable problem as format {result.format}; check the file or pass "
            f"--format (one of auto, {', '.join(FORMATS)})"
        )
    return result.problems, None


def run_show(args: argparse.Namespace) -> int:
    from microcoder.data.prompting.render import PromptRenderer, measure_prompts
    from microcoder.launch.config import load_config
    from microcoder.launch.run.model_dir import load_run_tokenizer

    if args.n is not None and args.n < 0:
        return _fail("--n must be >= 0")
    cfg = load_config(args.config, args.overrides)
    problems, error = _load(args.data, args.format)
    if error:
        return _fail(error)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # model building talks; stdout is data
            tokenizer = load_run_tokenizer(cfg)
    except (OSError, ValueError) as e:
        return _fail(f"cannot load the tokenizer of model.path = {cfg.model.path}: {e}")
    renderer = PromptRenderer(tokenizer, cfg.prompt, cfg.model.chat_template_kwargs)
    limit = cfg.generator.max_prompt_tokens
    measured = measure_prompts(renderer, problems, limit)
    by_id = {m.problem.id: m for m in measured.kept + measured.skipped}
    ordered = [by_id[p.id] for p in problems]
    n = args.n if args.n is not None else (len(ordered) if args.json else TEXT_DEFAULT_N)
    for i, m in enumerate(ordered[:n]):
        if args.json:
            line = {"problem_id": m.problem.id, "text": m.text, "tokens": m.tokens}
            print(json.dumps(line, ensure_ascii=False))
        else:
            kind = m.problem.kind
            print(f"--- [{i + 1}/{len(ordered)}] {m.problem.id} ({kind}, {m.tokens} tokens)")
            print(m.text)
    summary = _summary(cfg, [m.tokens for m in ordered], len(measured.skipped), limit)
    print(summary, file=sys.stderr if args.json else sys.stdout)
    print(_extraction(cfg, tokenizer), file=sys.stderr if args.json else sys.stdout)
    return 0


def _extraction(cfg, tokenizer) -> str:
    """Where the judged answer starts for this model (data/prompting/reasoning.py), as a run resolves it."""
    from microcoder.data.prompting.reasoning import resolve_reasoning

    kwargs = cfg.model.chat_template_kwargs
    resolved = resolve_reasoning(cfg.prompt.reasoning, tokenizer, kwargs)
    where = (
        "the whole reply" if resolved == "none" else f"the reply after the reasoning ({resolved})"
    )
    return (
        f"extraction: prompt.reasoning = {cfg.prompt.reasoning!r} -> {resolved!r}: the final "
        f"answer is {where}; a reply cut inside it gets the verdict `unfinished`"
    )


def _summary(cfg, tokens: list[int], over: int, limit: int) -> str:
    s = sorted(tokens)
    p90 = s[min(len(s) - 1, int(0.9 * len(s)))]
    return (
        f"prompts: {len(s)} problems, template {cfg.prompt.template!r}, tokenizer of "
        f"{cfg.model.path}: tokens min {s[0]}, median {statistics.median(s):g}, p90 {p90}, "
        f"max {s[-1]}; {over} of {len(s)} over generator.max_prompt_tokens = {limit} "
        "(a run skips them)"
    )

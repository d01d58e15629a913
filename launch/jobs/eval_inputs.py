"""The inputs of `microcoder eval`, checked before anything starts: option values, the problem
file and selection, the output folder (and, with --resume, that it was made by the same
evaluation). Errors are ValueError with the fix. Command-line side (it reads the parsed options
and names them in its errors), so it sits in launch/ beside launch/jobs/eval_command.py, its user;
the evaluation itself is in evaluation/."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from microcoder.data.formats.loaders import load_problems
from microcoder.data.prompting.reasoning import resolve_reasoning
from microcoder.data.prompting.render import PromptRenderer, measure_prompts
from microcoder.evaluation.select import parse_list, select_problems

FORMAT_ALIASES = {"microcoder": "jsonl", "livecodebench": "lcb", "own": "jsonl"}
RESUME_KEYS = (
    "model",
    "problems_file",
    "generations_file",
    "temperature",
    "top_p",
    "prompt",
    "chat_template_kwargs",
    "multi_turn",
)
"""settings.json fields that must match for --resume (they change what a sample is).
`multi_turn`: {"kind", "max_turns"} of a --max-turns evaluation, None for a single turn (so a
folder written before the field existed resumes as a single-turn one)."""


def warn(msg: str) -> None:
    print(f"microcoder eval: warning: {msg}", file=sys.stderr)


def int_list(value: str, option: str) -> list[int]:
    try:
        out = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{option} {value!r}: expected integers separated by commas") from None
    if not out or min(out) < 1:
        raise ValueError(f"{option} {value!r}: give one or more integers >= 1")
    return out


def load_selected(args) -> tuple[list, list, dict[str, Any]]:
    """(all problems, selected problems, report context "selection")."""

    fmt = FORMAT_ALIASES.get(args.format, args.format)
    problems = load_problems(args.problems, format=fmt)
    sel = select_problems(
        problems,
        args.date_from,
        args.date_to,
        parse_list(args.platform),
        parse_list(args.difficulty),
    )
    summary = sel.summary(len(problems))
    print(f"microcoder eval: {summary}", file=sys.stderr)
    if not sel.kept:
        raise ValueError(f"no problem left to evaluate ({summary}); widen the filters")
    selection = {
        "total": len(problems),
        "selected": len(sel.kept),
        "excluded": sel.excluded,
        "summary": summary,
        "from": args.date_from,
        "to": args.date_to,
        "platform": parse_list(args.platform),
        "difficulty": parse_list(args.difficulty),
    }
    return problems, sel.kept, selection


def out_folder(args) -> Path:
    """--out (default runs/eval-<timestamp>); refuses to overwrite samples without --resume."""
    out = Path(args.out or f"runs/eval-{time.strftime('%Y%m%d-%H%M%S')}")
    has_samples = (out / "samples.jsonl").exists()
    if args.resume and not has_samples:
        raise ValueError(f"--resume: {out} has no samples.jsonl to continue from; check --out")
    if has_samples and not args.resume:
        raise ValueError(
            f"{out} already holds an evaluation (samples.jsonl); pass --resume to continue it "
            "or choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def check_resume(out: Path, identity: dict[str, Any]) -> None:
    """With --resume: the fields in RESUME_KEYS must equal those of the first run."""
    path = out / "settings.json"
    if not path.exists():
        return
    before = json.loads(path.read_text())
    diff = [k for k in RESUME_KEYS if before.get(k) != identity.get(k)]
    if diff:
        shown = ", ".join(f"{k}: {before.get(k)!r} then, {identity.get(k)!r} now" for k in diff)
        raise ValueError(
            f"--resume: {out} was made with other settings ({shown}); run with the same ones "
            "or choose another --out"
        )


def model_context_limit(model_path: str) -> int | None:
    """max_position_embeddings of a Hugging Face model folder (None when not stated)."""
    try:
        cfg = json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = cfg.get("max_position_embeddings")
    return int(value) if isinstance(value, int) else None


def check_model(model_path: str | None, prompt_tokens: int, budget: int) -> None:
    if not model_path:
        raise ValueError("--model DIR is needed (or --generations FILE to judge given samples)")
    if not (Path(model_path) / "config.json").is_file():
        raise ValueError(
            f"--model {model_path}: no config.json there; point it at a Hugging Face model "
            "folder (e.g. one made by `microcoder tiny-model` or a downloaded checkpoint)"
        )
    limit = model_context_limit(model_path)
    if limit is not None and prompt_tokens + budget > limit:
        raise ValueError(
            f"--max-prompt-tokens {prompt_tokens} + --max-tokens {budget} = "
            f"{prompt_tokens + budget} exceeds the model's context ({limit} tokens); lower them"
        )


def render_prompts(model_path: str, cfg, problems, prompt_tokens: int, budget: int):
    """Check the model fits `prompt_tokens` + `budget`, point `cfg` (model.path,
    generator.max_prompt_tokens / max_response_tokens) at them, and render every problem's
    prompt with the run's template: data/prompting/render.py's `measure_prompts` result (kept, skipped).
    `cfg.prompt.reasoning` is resolved for the model's chat template (data/prompting/reasoning.py), as a
    run does, so the extraction of its replies is the run's."""
    from transformers import AutoTokenizer

    check_model(model_path, prompt_tokens, budget)
    cfg.model.path = model_path
    cfg.generator.max_prompt_tokens = prompt_tokens
    cfg.generator.max_response_tokens = budget
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    kwargs = cfg.model.chat_template_kwargs
    cfg.prompt.reasoning = resolve_reasoning(cfg.prompt.reasoning, tokenizer, kwargs)
    renderer = PromptRenderer(tokenizer, cfg.prompt, kwargs)
    return measure_prompts(renderer, problems, prompt_tokens)

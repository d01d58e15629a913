"""The run's problems from `[data]` and `[eval]`: training prompts rendered and measured once, at
load time, and the held-out set of the periodic evaluation.

- Training problems: the bundled synthetic family, or a problem file (any loader format),
  minus the held-out part when `eval.holdout_fraction` > 0 (chosen by problem id,
  data/corpus/holdout.py).
- Every training prompt is rendered by the prompt layer (data/prompting/render.py) and measured with the
  run's tokenizer. One over `generator.max_prompt_tokens` is skipped now, never sent to an
  engine: it is listed in RUN_DIR/skipped_prompts.jsonl (id and token count) and the launcher
  warns once with the count and the remedy.
- Held-out problems: the synthetic family's own held-out split, `eval.problems_file`, or the
  held-out fraction of the training file; the first `eval.problems` of them.
- A run's bring-up loads them with `load_for_run`, which also resolves `prompt.reasoning` for the
  model's tokenizer (how the executors extract replies).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from microcoder.data.problem import Problem
from microcoder.data.sources import load_run_problems
from microcoder.launch.config import Config, ConfigError
from microcoder.protocol import TrainingPrompt


@dataclass
class RunProblems:
    """What a run trains and evaluates on."""

    prompts: list[TrainingPrompt]
    """(problem_id, rendered prompt text) of every training problem whose prompt fits, in file
    order: what the buffer hands out."""
    heldout: list[Problem] = field(default_factory=list)
    """The periodic evaluation's problems whose prompt fits (empty: no evaluation)."""
    heldout_texts: dict[str, str] = field(default_factory=dict)
    """Rendered prompt text of each held-out problem, by id."""
    skipped: int = 0
    """Training prompts skipped for being over generator.max_prompt_tokens."""


def heldout_problems(cfg: Config, train: list[Problem]) -> tuple[list[Problem], list[Problem]]:
    """(training problems, held-out problems) under `[eval]`; see the module docstring."""
    ev = cfg.eval
    if ev.problems_file:
        from microcoder.data.formats.loaders import load_problems

        held = load_problems(ev.problems_file, format=ev.problems_format)
    elif ev.holdout_fraction > 0:
        from microcoder.data.corpus.holdout import holdout_split

        train, held = holdout_split(train, ev.holdout_fraction)
        if not train:
            raise ConfigError(
                f"eval.holdout_fraction = {ev.holdout_fraction} holds out every one of the "
                "training problems; lower it"
            )
    else:
        held = load_run_problems(cfg.data, cfg.seed, "heldout")
    if cfg.eval.every and not held:
        raise ConfigError(
            f"eval.every = {cfg.eval.every} but there is no held-out set for data.source = "
            f"{cfg.data.source!r}: set eval.problems_file = FILE or eval.holdout_fraction = 0.1 "
            "(or eval.every = 0)"
        )
    return train, held[: ev.problems]


def training_prompts(cfg: Config, model_path: str | Path) -> list[TrainingPrompt]:
    """(problem_id, prompt text) pairs a buffer host serves for `cfg` with the tokenizer of
    `model_path` (tests and benchmarks that start a buffer host without a launcher)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    return prepare_run_problems(cfg, tokenizer, None, log=lambda _msg: None).prompts


def prepare_run_problems(
    cfg: Config, tokenizer, run_dir: Path | None, log: Callable[[str], None] = print
) -> RunProblems:
    """Load, split, render and measure the run's problems (see the module docstring); the
    skipped prompts are listed in `run_dir`/skipped_prompts.jsonl (run_dir None: not written)."""
    from microcoder.data.prompting.render import PromptRenderer, measure_prompts

    train, held = heldout_problems(cfg, load_run_problems(cfg.data, cfg.seed, "train"))
    renderer = PromptRenderer(tokenizer, cfg.prompt, cfg.model.chat_template_kwargs)
    limit = cfg.generator.max_prompt_tokens
    measured = measure_prompts(renderer, train, limit)
    measured_held = measure_prompts(renderer, held, limit)
    skipped = [("train", m) for m in measured.skipped]
    skipped += [("heldout", m) for m in measured_held.skipped]
    path = run_dir / "skipped_prompts.jsonl" if run_dir is not None else "(not written)"
    if run_dir is not None:
        with path.open("w") as f:
            for split, m in skipped:
                row = {
                    "problem_id": m.problem.id,
                    "split": split,
                    "tokens": m.tokens,
                    "max_prompt_tokens": limit,
                }
                f.write(json.dumps(row) + "\n")
    if skipped:
        longest = max(m.tokens for _, m in skipped)
        log(
            f"WARNING: {len(measured.skipped)} of {len(train)} training prompts and "
            f"{len(measured_held.skipped)} of {len(held)} held-out prompts are longer than "
            f"generator.max_prompt_tokens = {limit} (longest {longest} tokens) and are skipped; "
            f"they are listed in {path}. To keep them, raise generator.max_prompt_tokens "
            f"(e.g. --set generator.max_prompt_tokens={longest})"
        )
    if not measured.kept:
        raise ConfigError(
            f"every one of the {len(train)} training prompts is longer than "
            f"generator.max_prompt_tokens = {limit}: nothing to train on; raise it to at least "
            f"{min(m.tokens for m in measured.skipped)} (see {path})"
        )
    return RunProblems(
        prompts=[TrainingPrompt(m.problem.id, m.text) for m in measured.kept],
        heldout=[m.problem for m in measured_held.kept],
        heldout_texts={m.problem.id: m.text for m in measured_held.kept},
        skipped=len(measured.skipped),
    )


def empty_heldout_warning(cfg: Config, heldout: list) -> str:
    """The warning when the run is asked to evaluate (`eval.every`) but has no held-out problem
    left after the prompt-length check; "" otherwise."""
    if not cfg.eval.every or heldout:
        return ""
    return (
        f"WARNING: eval.every = {cfg.eval.every} but no held-out problem is left, so no held-out "
        "evaluation will run; give eval.problems_file or eval.holdout_fraction, or raise "
        "generator.max_prompt_tokens if the held-out prompts were skipped above"
    )


def load_for_run(
    cfg: Config, model_path: str, run_dir: Path, log: Callable[[str], None]
) -> tuple[RunProblems, str]:
    """(the run's problems, its reasoning extraction), for `Run.bring_up` (launch/run/cluster.py):
    the problems measured with the model's tokenizer (`prepare_run_problems`), and
    `prompt.reasoning` resolved for that tokenizer (data/prompting/reasoning.py), which the
    executors extract replies under. Each step is logged through `log`."""
    from transformers import AutoTokenizer

    from microcoder.data.prompting.reasoning import resolve_reasoning

    log("loading the problems and measuring their prompts")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    reasoning = resolve_reasoning(cfg.prompt.reasoning, tokenizer, cfg.model.chat_template_kwargs)
    log(f"extraction: prompt.reasoning = {cfg.prompt.reasoning!r} -> {reasoning!r}")
    problems = prepare_run_problems(cfg, tokenizer, run_dir, log)
    log(
        f"{len(problems.prompts)} training prompts ({problems.skipped} skipped as "
        f"too long), {len(problems.heldout)} held-out problems"
    )
    if warning := empty_heldout_warning(cfg, problems.heldout):
        log(warning)
    return problems, reasoning

"""The run's problems from `[data]` and `[eval]`: kept in the run's problem store
(data/store.py, RUN_DIR/problems.sqlite), their training prompts rendered and measured once into
it, and the held-out set of the periodic evaluation.

- Training problems: every source of `data.sources` (or the one `data.source`: the bundled
  synthetic family or a problem file in any loader format), written into the store in one
  streaming pass per source, minus each source's held-out part (its `holdout_fraction`, else
  `eval.holdout_fraction`, chosen by problem id, data/corpus/holdout.py). A store already in the
  run directory with the same sources (content hash) is reused.
- Every training prompt is rendered by the prompt layer (data/prompting/render.py) and measured
  with the run's tokenizer in batches, stored in the store under a measurement key (template,
  system prompts, chat-template arguments, tokenizer), so a resume re-renders nothing. One over
  `generator.max_prompt_tokens` is skipped, never sent to an engine: it is listed in
  RUN_DIR/skipped_prompts.jsonl (id and token count) and the launcher warns once with the
  count and the remedy.
- Held-out problems: `eval.problems_file`, else the held-out fraction of the sources, else the
  synthetic family's own held-out split; the first `eval.problems` of them (a list: small).
- A run's bring-up loads them with `load_for_run`, which also resolves `prompt.reasoning` for the
  model's tokenizer (how the executors extract replies). The buffer host opens the prompts from
  the store's path (`RunProblems.table_spec`), the executors the problems (actors/executor.py).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import Problem
from microcoder.data.prompting.reasoning import resolve_reasoning
from microcoder.data.prompting.render import PromptRenderer, measure_prompts
from microcoder.data.store import (
    STORE_NAME,
    NoTrainingProblems,
    ProblemStore,
    StorePromptTable,
    StoreTableSpec,
    build_store,
    measure_key,
    measure_store,
    over_limit,
)
from microcoder.launch.config import Config, ConfigError
from microcoder.protocol import TrainingPrompt


@dataclass
class RunProblems:
    """What a run trains and evaluates on. The training prompts stay in the run's problem store
    (data/store.py): this names the store, the measurement its prompts were counted under and
    the limit they must fit; only the (small) held-out set is held here."""

    store_path: Path
    """The run's problem store (RUN_DIR/problems.sqlite)."""
    measure_key: str
    """The store's prompt measurement of this run (data/store.py `measure_key`)."""
    max_tokens: int
    """generator.max_prompt_tokens: prompts over it are skipped."""
    counts: dict[str, int] = field(default_factory=dict)
    """Training prompts that fit, per source name (config order)."""
    heldout: list[Problem] = field(default_factory=list)
    """The periodic evaluation's problems whose prompt fits (empty: no evaluation)."""
    heldout_texts: dict[str, str] = field(default_factory=dict)
    """Rendered prompt text of each held-out problem, by id."""
    skipped: int = 0
    """Training prompts skipped for being over generator.max_prompt_tokens."""

    @property
    def total(self) -> int:
        """Training prompts that fit, over every source."""
        return sum(self.counts.values())

    def table(self):
        """The training prompts as a PromptTable (data/store.py StorePromptTable)."""

        return StorePromptTable(self.store_path, self.measure_key, self.max_tokens)

    def table_spec(self) -> StoreTableSpec:
        """What a buffer host opens the table from (paths and a key, nothing of the data)."""
        return StoreTableSpec(str(self.store_path.resolve()), self.measure_key, self.max_tokens)

    def head(self, n: int) -> list[TrainingPrompt]:
        """The first `n` training prompts, source by source in row order (the temperature
        probe's)."""
        table = self.table()
        try:
            out = []
            for source in range(len(table.source_names())):
                for i in range(min(table.count(source), n - len(out))):
                    out.append(TrainingPrompt(*table.item(source, i)))
            return out
        finally:
            table.close()

    def prompts(self) -> list[TrainingPrompt]:
        """Every training prompt (tests and benchmarks on small sets; a run never calls it)."""
        return self.head(self.total)


def default_holdout(cfg: Config) -> float:
    """The held-out fraction of a source that sets none: `eval.holdout_fraction`, unless
    `eval.problems_file` gives the held-out set (then the training file is not split)."""
    return 0.0 if cfg.eval.problems_file else cfg.eval.holdout_fraction


def build_run_store(
    cfg: Config, path: Path, log: Callable[[str], None] = print
) -> tuple[Path, bool]:
    """The run's problem store at `path` (data/store.py `build_store`: one streaming pass per
    source; reused when the one there has the same key). Returns (path, built)."""

    try:
        return build_store(cfg.data.source_list(), cfg.seed, default_holdout(cfg), path, log)
    except NoTrainingProblems as err:
        if not err.held_out:
            raise
        raise ConfigError(f"{err} (eval.holdout_fraction or the source's own)") from None


def heldout_problems(cfg: Config, store) -> list[Problem]:
    """The held-out problems under `[eval]` (the first `eval.problems`; see the module
    docstring), from the run's ProblemStore `store` unless eval.problems_file names a file."""

    ev = cfg.eval
    if ev.problems_file:
        held = load_problems(ev.problems_file, format=ev.problems_format)[: ev.problems]
    else:
        counts = store.counts()
        split = "heldout" if any(c["heldout"] for c in counts) else "family"
        held = list(islice(store.problems(split=split), ev.problems))
    if cfg.eval.every and not held:
        raise ConfigError(
            f"eval.every = {cfg.eval.every} but there is no held-out set for data.source = "
            f"{cfg.data.source!r}: set eval.problems_file = FILE or eval.holdout_fraction = 0.1 "
            "(or eval.every = 0)"
        )
    return held


def training_prompts(cfg: Config, model_path: str | Path) -> list[TrainingPrompt]:
    """(problem_id, prompt text) pairs a buffer host serves for `cfg` with the tokenizer of
    `model_path` (tests and benchmarks on small sets that start a buffer host without a
    launcher)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    return prepare_run_problems(cfg, tokenizer, None, log=lambda _msg: None).prompts()


def prepare_run_problems(
    cfg: Config, tokenizer, run_dir: Path | None, log: Callable[[str], None] = print
) -> RunProblems:
    """Build (or reuse) the run's problem store, measure its training prompts (or reuse the
    measurement) and load the held-out set (see the module docstring); the skipped prompts are
    listed in `run_dir`/skipped_prompts.jsonl. run_dir None: the store goes to a new temporary
    folder and the list is not written."""

    folder = run_dir if run_dir is not None else Path(tempfile.mkdtemp(prefix="microcoder-store-"))
    store_path, _ = build_run_store(cfg, folder / STORE_NAME, log)
    renderer = PromptRenderer(tokenizer, cfg.prompt, cfg.model.chat_template_kwargs)
    key = measure_key(renderer)
    measure_store(store_path, renderer, key, log)
    limit = cfg.generator.max_prompt_tokens
    store = ProblemStore(store_path)
    try:
        held = heldout_problems(cfg, store)
        total = sum(c["train"] for c in store.counts())
        names = store.source_names()
        fits = RunProblems(store_path, key, limit).table()
        counts = {name: fits.count(i) for i, name in enumerate(names)}
        fits.close()
    finally:
        store.close()
    over = over_limit(store_path, key, limit)
    measured_held = measure_prompts(renderer, held, limit)
    skipped = [("train", pid, tokens) for pid, tokens in over]
    skipped += [("heldout", m.problem.id, m.tokens) for m in measured_held.skipped]
    path = run_dir / "skipped_prompts.jsonl" if run_dir is not None else "(not written)"
    if run_dir is not None:
        with path.open("w") as f:
            for split, pid, tokens in skipped:
                row = {
                    "problem_id": pid,
                    "split": split,
                    "tokens": tokens,
                    "max_prompt_tokens": limit,
                }
                f.write(json.dumps(row) + "\n")
    if skipped:
        longest = max(tokens for _, _, tokens in skipped)
        log(
            f"WARNING: {len(over)} of {total} training prompts and "
            f"{len(measured_held.skipped)} of {len(held)} held-out prompts are longer than "
            f"generator.max_prompt_tokens = {limit} (longest {longest} tokens) and are skipped; "
            f"they are listed in {path}. To keep them, raise generator.max_prompt_tokens "
            f"(e.g. --set generator.max_prompt_tokens={longest})"
        )
    if not sum(counts.values()):
        raise ConfigError(
            f"every one of the {total} training prompts is longer than "
            f"generator.max_prompt_tokens = {limit}: nothing to train on; raise it to at least "
            f"{min(tokens for _, tokens in over)} (see {path})"
        )
    return RunProblems(
        store_path=store_path,
        measure_key=key,
        max_tokens=limit,
        counts=counts,
        heldout=[m.problem for m in measured_held.kept],
        heldout_texts={m.problem.id: m.text for m in measured_held.kept},
        skipped=len(over),
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

    log("loading the problems and measuring their prompts")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    reasoning = resolve_reasoning(cfg.prompt.reasoning, tokenizer, cfg.model.chat_template_kwargs)
    log(f"extraction: prompt.reasoning = {cfg.prompt.reasoning!r} -> {reasoning!r}")
    problems = prepare_run_problems(cfg, tokenizer, run_dir, log)
    log(
        f"{problems.total} training prompts ({problems.skipped} skipped as "
        f"too long), {len(problems.heldout)} held-out problems"
    )
    if warning := empty_heldout_warning(cfg, problems.heldout):
        log(warning)
    return problems, reasoning

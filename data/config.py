"""Config of the data layer: which problems a run reads (root section `[data]`) and which
template renders them (root section `[prompt]`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from microcoder.config import Section
from microcoder.data.formats.names import FORMAT_CHOICES
from microcoder.data.problem import KINDS
from microcoder.data.prompting.reasoning import check_reasoning
from microcoder.data.prompting.template_file import PromptTemplateError, resolve_template


class PromptConfig(Section):
    template: str = "default"
    """Prompt wording: `default` (ours), `lcb` (LiveCodeBench's own wording) or the path of a
    TOML template file with tables [stdin], [functional], [assert], [answer], each `system` and `user`
    (placeholders {statement}, {starter_code}, {fn_name}); see data/prompting/template_file.py."""
    system: dict[str, str] = {}
    """Per-kind system prompt replacing the template's, e.g. {stdin = "..."}; kinds: stdin,
    functional, assert, answer; an empty string drops the system message."""
    reasoning: str = "auto"
    """Where the final answer starts (sandbox/extract.py): `none` (the whole response is the
    answer), `think` (the answer follows `</think>`), `marker:END` (it follows the string END,
    e.g. `marker:[/THINK]`), or `auto`: the model's family decides, read from its chat template
    (data/prompting/reasoning.py): `think` when the template knows `</think>` (Qwen3, DeepSeek-R1 and its
    distills) unless the rendered prompt already closes the reasoning (Qwen3 with
    {enable_thinking = false}), `marker:[/THINK]` for `[/THINK]` templates, else `none` (the
    tiny model, Qwen2.5, Llama 3, Mistral, Gemma 2). A response cut inside its reasoning or its
    final code block (or at the token cap before a closed block) gets the verdict `unfinished`,
    reward 0, and is not judged."""

    @field_validator("template")
    @classmethod
    def _known_template(cls, value: str) -> str:
        try:
            resolve_template(value)
        except PromptTemplateError as e:
            raise ValueError(str(e)) from None
        return value

    @field_validator("reasoning")
    @classmethod
    def _known_reasoning(cls, value: str) -> str:
        return check_reasoning(value)

    @field_validator("system")
    @classmethod
    def _known_kinds(cls, value: dict[str, str]) -> dict[str, str]:
        for kind in value:
            if kind not in KINDS:
                raise ValueError(
                    f"prompt.system.{kind}: unknown problem kind; the kinds are {', '.join(KINDS)}"
                )
        return value


FormatName = Literal[FORMAT_CHOICES]  # a tuple subscript: Literal["auto", "jsonl", ...]
"""Loader names and aliases (data/formats/names.py FORMAT_CHOICES)."""


class DataSourceConfig(Section):
    """One entry of `data.sources`: a problem file (or a bundled synthetic family) and its weight
    in the mixture."""

    path: str
    """A problem file (JSONL etc., any loader format) or a bundled synthetic family name
    (`synthetic`, `synthetic-long`)."""
    weight: float = Field(1.0, gt=0)
    """Relative share of the prompts drawn from this source (weights need not sum to 1)."""
    format: FormatName = "auto"
    """Loader for `path`, as `data.format`."""
    name: str = ""
    """The source's name in metrics and in renamed ids (`<name>:<id>` on an id clash); default
    the file's stem (the family name for a synthetic source). Names must be unique."""
    holdout_fraction: float | None = Field(None, ge=0, lt=1)
    """Held-out fraction of this source (by problem id, data/corpus/holdout.py); unset =
    `eval.holdout_fraction`."""

    def display_name(self) -> str:
        """`name`, else the file's stem (a synthetic family's own name)."""
        if self.name:
            return self.name

        stem = Path(self.path).name
        for suffix in (".gz", ".jsonl", ".json"):
            stem = stem.removesuffix(suffix)
        return stem or self.path


class DataConfig(Section):
    source: str = "synthetic"
    """Problems: a bundled synthetic family (`synthetic`; `synthetic-long`, whose answers take most
    of a 96-token cap: data/sources.py SYNTHETIC_VARIANTS) or a path to a problem file (JSONL etc.)."""
    format: FormatName = "auto"
    """Loader for `source`; auto guesses from the rows. `microcoder` = `jsonl` (our own rows),
    `livecodebench` = `lcb`; the names are data/formats/names.py's FORMAT_CHOICES."""
    shuffle_seed: int | None = None
    """Seed of the per-epoch prompt order. Unset (the default) = the run's `seed`, so runs of
    different seeds (each arm-seed of `microcoder compare`) train on different prompt orders;
    set it to give every seed the same order (then only sampling and the truncation-mask draws
    vary with `seed`). `order_seed` resolves it. A resume keeps the order: it reads the run's
    config.toml, and a buffer snapshot's cursor refuses another order seed."""
    epochs: int = Field(0, ge=0)
    """Passes over the problems; 0 = endless (the run stops at max_steps). With several
    `sources`, each source counts its own passes and leaves the mixture after `epochs` of them."""
    sources: list[DataSourceConfig] = []
    """A weighted mixture of problem files, e.g. `sources = [{ path = "A.jsonl", weight = 0.7 },
    { path = "B.jsonl", weight = 0.3 }]`: each prompt comes from a source drawn by weight, each
    source walked in its own seeded shuffle per epoch. Ids stay unique across sources (the later
    one is renamed `<name>:<id>` on a clash, as `microcoder data build` does). Set either `source`
    or `sources`; `source = X` is the one-source spelling of `sources = [{ path = X }]`."""
    retire_solved_after: int = Field(0, ge=0)
    """Online difficulty: a problem whose last K groups were all correct (every judged response
    AC) is not handed out again in this run (counted in metrics as retired); 0 = off
    (buffer/difficulty.py, docs/data.md)."""
    skip_unsolved_after: int = Field(0, ge=0)
    """Online difficulty: a problem whose last K groups were all wrong (no response AC) is
    deferred: it sits out the next epoch of its source and comes back in the one after (counted
    in metrics as deferred); 0 = off."""

    @model_validator(mode="after")
    def _one_spelling(self) -> DataConfig:
        if self.sources and (self.source != "synthetic" or self.format != "auto"):
            raise ValueError(
                "set data.source (one source) or data.sources (a mixture), not both; move the "
                "path into sources = [{ path = ..., weight = ... }]"
            )
        names = [s.display_name() for s in self.sources]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"data.sources: two sources are named {dup[0]!r}; give one a `name`")
        return self

    def source_list(self) -> list[DataSourceConfig]:
        """The sources of the run: `sources`, or the one `source` (weight 1)."""
        if self.sources:
            return list(self.sources)
        return [DataSourceConfig(path=self.source, format=self.format)]

    def order_seed(self, seed: int) -> int:
        """The seed of the prompt order in a run of global `seed`: `shuffle_seed` when set,
        else `seed`."""
        return seed if self.shuffle_seed is None else self.shuffle_seed

"""Config of the data layer: which problems a run reads (root section `[data]`) and which
template renders them (root section `[prompt]`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from microcoder.config import Section
from microcoder.data.problem import KINDS
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
        from microcoder.sandbox.extract import check_reasoning

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


class DataConfig(Section):
    source: str = "synthetic"
    """Problems: a bundled synthetic family (`synthetic`; `synthetic-long`, whose answers take most
    of a 96-token cap: data/sources.py SYNTHETIC_VARIANTS) or a path to a problem file (JSONL etc.)."""
    format: Literal[
        "auto",
        "jsonl",
        "lcb",
        "humaneval",
        "leetcodedataset",
        "apps",
        "taco",
        "rllm",
        "answer",
        "microcoder",
        "livecodebench",
    ] = "auto"
    """Loader for `source`; auto guesses from the rows. `microcoder` = `jsonl` (our own rows),
    `livecodebench` = `lcb`; the names are data/formats/loaders.py's FORMAT_CHOICES."""
    shuffle_seed: int | None = None
    """Seed of the per-epoch prompt order. Unset (the default) = the run's `seed`, so runs of
    different seeds (each arm-seed of `microcoder compare`) train on different prompt orders;
    set it to give every seed the same order (then only sampling and the truncation-mask draws
    vary with `seed`). `order_seed` resolves it. A resume keeps the order: it reads the run's
    config.toml, and a buffer snapshot's cursor refuses another order seed."""
    epochs: int = Field(0, ge=0)
    """Passes over the problems; 0 = endless (the run stops at max_steps)."""

    def order_seed(self, seed: int) -> int:
        """The seed of the prompt order in a run of global `seed`: `shuffle_seed` when set,
        else `seed`."""
        return seed if self.shuffle_seed is None else self.shuffle_seed

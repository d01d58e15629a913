"""Config of the prompt layer (root section `[prompt]`): which template renders the problems."""

from __future__ import annotations

from pydantic import field_validator

from microcoder.config import Section
from microcoder.data.problem import KINDS
from microcoder.data.prompt_file import PromptTemplateError, resolve_template


class PromptConfig(Section):
    template: str = "default"
    """Prompt wording: `default` (ours), `lcb` (LiveCodeBench's own wording) or the path of a
    TOML template file with tables [stdin], [functional], [assert], each `system` and `user`
    (placeholders {statement}, {starter_code}, {fn_name}); see data/prompt_file.py."""
    system: dict[str, str] = {}
    """Per-kind system prompt replacing the template's, e.g. {stdin = "..."}; kinds: stdin,
    functional, assert; an empty string drops the system message."""

    @field_validator("template")
    @classmethod
    def _known_template(cls, value: str) -> str:
        try:
            resolve_template(value)
        except PromptTemplateError as e:
            raise ValueError(str(e)) from None
        return value

    @field_validator("system")
    @classmethod
    def _known_kinds(cls, value: dict[str, str]) -> dict[str, str]:
        for kind in value:
            if kind not in KINDS:
                raise ValueError(
                    f"prompt.system.{kind}: unknown problem kind; the kinds are {', '.join(KINDS)}"
                )
        return value

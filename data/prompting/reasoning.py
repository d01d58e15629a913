"""`prompt.reasoning = "auto"` resolved from the model's chat template (per model family).

    resolve_reasoning(value, tokenizer, chat_template_kwargs) -> "none" | "think" | "marker:END"

A family is known by its chat template, not by config.json's `model_type`
(learner/models/families.py): DeepSeek-R1's distills are `qwen2` and `llama` models that reason, while
Qwen2.5 and Llama 3 (the same model types) do not. A thinking family's template names its end
marker (`</think>` for Qwen3 and R1, `[/THINK]` for Magistral), to strip the reasoning from past
turns or to open it in the prompt. The rule:
- the template names none of REASONING_MARKERS: `none` (the tiny model, Qwen2.5, Llama 3,
  Mistral, Gemma 2);
- else, when the prompt it renders (with `model.chat_template_kwargs`) already holds the end
  marker after the user's message, the reasoning is closed before the model starts (Qwen3 with
  {enable_thinking = false}): `none`;
- else that marker's mode (`think` for `</think>`).
An explicit value (`none`, `think`, `marker:END`) is returned as is.
"""

from __future__ import annotations

from typing import Any

THINK_END = "</think>"
MARKER_PREFIX = "marker:"
REASONING_HELP = (
    '"auto", "none", "think" (reasoning ends with </think>) or "marker:END" (reasoning ends '
    'with the string END, e.g. "marker:[/THINK]")'
)

REASONING_MARKERS = {THINK_END: "think", "[/THINK]": "marker:[/THINK]"}
"""End marker a chat template names -> the `prompt.reasoning` it implies (the values
sandbox/extract.py reads: it imports them from here, data/ lying below sandbox/)."""


def check_reasoning(value: str) -> str:
    """`value` if it is a valid `prompt.reasoning`, else ValueError naming the choices."""
    if value in ("auto", "none", "think"):
        return value
    if value.startswith(MARKER_PREFIX) and value[len(MARKER_PREFIX) :].strip():
        return value
    raise ValueError(f"prompt.reasoning = {value!r}: set it to {REASONING_HELP}")


_PROBE = "microcoder reasoning probe"


def _template_text(tokenizer) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: all of them
        return "\n".join(str(t) for t in template.values())
    return str(template or "")


def resolve_reasoning(
    value: str, tokenizer, chat_template_kwargs: dict[str, Any] | None = None
) -> str:
    """The concrete `prompt.reasoning` for this tokenizer (see the module docstring)."""
    check_reasoning(value)
    if value != "auto":
        return value
    template = _template_text(tokenizer)
    found = [(end, mode) for end, mode in REASONING_MARKERS.items() if end in template]
    if not found:
        return "none"
    end, mode = found[0]
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": _PROBE}],
        add_generation_prompt=True,
        tokenize=False,
        **dict(chat_template_kwargs or {}),
    )
    tail = prompt.rpartition(_PROBE)[2]
    return "none" if end in tail else mode

"""The prompt layer: a problem's chat messages, its chat-templated text and token ids.

    renderer = PromptRenderer(tokenizer, cfg.prompt, cfg.model.chat_template_kwargs)
    renderer.text(problem)   # what a generator receives
    renderer.ids(problem)    # == renderer.encode_text(renderer.text(problem))
    kept = measure_prompts(renderer, problems, cfg.generator.max_prompt_tokens).kept

Training, the periodic held-out evaluation and `microcoder eval` all render through
PromptRenderer, so a model sees the same prompt everywhere. The wording comes from the
template `prompt.template` names (data/prompting/templates.py, data/prompting/template_file.py) with the
per-kind `prompt.system` overrides. No torch import; the tokenizer is any Hugging Face one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from microcoder.data.config import PromptConfig
from microcoder.data.problem import Problem
from microcoder.data.prompting.template_file import resolve_template
from microcoder.data.prompting.templates import FIELDS, Template, in_language

RESERVED_CHAT_KWARGS = frozenset(
    {
        "conversation",
        "messages",
        "tools",
        "documents",
        "chat_template",
        "add_generation_prompt",
        "continue_final_message",
        "tokenize",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
    }
)
"""apply_chat_template's own parameters: not template variables."""


def check_chat_template_kwargs(kwargs: dict[str, Any]) -> None:
    """Refuse keys that would collide with apply_chat_template's own parameters."""
    bad = sorted(RESERVED_CHAT_KWARGS & set(kwargs))
    if bad:
        raise ValueError(
            f"model.chat_template_kwargs: {', '.join(repr(k) for k in bad)}: parameters of "
            "apply_chat_template itself, not chat template variables; remove them (template "
            "variables look like {enable_thinking = false})"
        )


def _messages(problem: Problem, cfg: PromptConfig, template: Template) -> list[dict[str, str]]:
    if problem.kind not in FIELDS:
        raise ValueError(
            f"problem {problem.id}: kind {problem.kind!r} has no prompt renderer; "
            f"the kinds are {', '.join(FIELDS)}"
        )
    wording = template[problem.kind]
    system = in_language(cfg.system.get(problem.kind, wording.system), problem.language, True)
    user = in_language(wording.user(FIELDS[problem.kind](problem)), problem.language)
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": user}]


def render_messages(problem: Problem, cfg: PromptConfig) -> list[dict[str, str]]:
    """[system?, user] chat messages for `problem` under `cfg` (template by name, per-kind
    system overrides)."""
    return _messages(problem, cfg, resolve_template(cfg.template))


def chat_prompt_ids(
    tokenizer, messages: list[dict[str, str]], chat_template_kwargs: dict[str, Any] | None = None
) -> list[int]:
    """Chat-template token ids of `messages` with the assistant turn opened."""
    kwargs = dict(chat_template_kwargs or {})
    check_chat_template_kwargs(kwargs)
    enc = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, **kwargs
    )
    return list(enc["input_ids"])


class PromptRenderer:
    """Renders problems for one tokenizer and prompt config (the template is resolved once)."""

    def __init__(
        self,
        tokenizer,
        cfg: PromptConfig | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ):
        self.tokenizer = tokenizer
        self.cfg = cfg if cfg is not None else PromptConfig()
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        check_chat_template_kwargs(self.chat_template_kwargs)
        self._template = resolve_template(self.cfg.template)

    def messages(self, problem: Problem) -> list[dict[str, str]]:
        """[system?, user] chat messages."""
        return _messages(problem, self.cfg, self._template)

    def text(self, problem: Problem) -> str:
        """The full chat-templated prompt with the assistant turn opened (what generators get)."""
        return self.tokenizer.apply_chat_template(
            self.messages(problem),
            add_generation_prompt=True,
            tokenize=False,
            **self.chat_template_kwargs,
        )

    def ids(self, problem: Problem) -> list[int]:
        """Token ids of `text(problem)`."""
        return chat_prompt_ids(self.tokenizer, self.messages(problem), self.chat_template_kwargs)

    def encode_text(self, text: str) -> list[int]:
        """Ids of a prompt text as `text` made it (no special tokens added: the template has
        them), i.e. what a generator does with a prompt text it receives."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_texts(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode_text` of each text, in one batched tokenizer call."""
        if not texts:
            return []
        enc = self.tokenizer(list(texts), add_special_tokens=False)
        return [list(ids) for ids in enc["input_ids"]]


@dataclass
class MeasuredPrompt:
    """A rendered prompt and its length under the run's tokenizer."""

    problem: Problem
    text: str
    """PromptRenderer.text(problem)."""
    tokens: int
    """len(encode_text(text))."""


@dataclass
class PromptSet:
    """Problems split by prompt length."""

    kept: list[MeasuredPrompt]
    """Prompts of at most max_tokens tokens, in input order."""
    skipped: list[MeasuredPrompt]
    """Prompts over the limit, in input order."""


def measure_prompts(
    renderer: PromptRenderer,
    problems: Iterable[Problem],
    max_tokens: int,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = 256,
) -> PromptSet:
    """Render and count every problem's prompt; those over `max_tokens` go to `skipped`.
    `progress(done, total)` is called after each chunk of `chunk` prompts."""
    problems = list(problems)
    out = PromptSet(kept=[], skipped=[])
    for start in range(0, len(problems), chunk):
        part = problems[start : start + chunk]
        texts = [renderer.text(p) for p in part]
        for p, text, ids in zip(part, texts, renderer.encode_texts(texts), strict=True):
            m = MeasuredPrompt(p, text, len(ids))
            (out.kept if m.tokens <= max_tokens else out.skipped).append(m)
        if progress is not None:
            progress(start + len(part), len(problems))
    return out

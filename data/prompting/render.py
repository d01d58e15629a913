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


_TURN_MARK = "\u2063mc-end-of-assistant-turn\u2063"
"""The assistant content `continuation_ids` renders in place of the model's answer: the
template's text after it is the end of the assistant turn and what follows."""


class ContinuationError(ValueError):
    """The chat template did not render a conversation so that its continuation can be cut out
    (the message says what the template did)."""


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

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of `messages` under the chat template with the assistant turn opened
        (an environment's first-turn messages; `ids(problem)` for the renderer's own)."""
        return chat_prompt_ids(self.tokenizer, messages, self.chat_template_kwargs)

    def continuation_ids(
        self,
        messages: list[dict[str, str]],
        feedback: list[dict[str, str]],
        response_ids: Sequence[int] = (),
    ) -> list[int]:
        """The token ids that follow a model turn in a multi-turn conversation: the end of the
        assistant turn, the `feedback` messages (an environment's, actors/environments/) and the
        next assistant turn's opening (the generation prompt), exactly as the chat template
        renders them after the assistant's answer. `messages` is the conversation the model
        answered (its last message the prompt), `response_ids` the tokens it sampled.

        The template renders `messages` + an assistant turn + `feedback` with the generation
        prompt; the text after the assistant's content is the continuation (the answer itself is
        never re-rendered nor re-tokenized: the trajectory keeps the sampled tokens, so the
        learner's log-probs line up with the engine's). The model's answer usually ends with the
        template's end-of-turn token (its EOS, e.g. <|im_end|>): when the continuation starts
        with the answer's last token and that token is a special one, it is not repeated. A truncated answer gets the
        end of turn from the continuation."""
        if not feedback:
            raise ValueError("continuation_ids needs at least one feedback message")
        turn = {"role": "assistant", "content": _TURN_MARK}
        text = self.tokenizer.apply_chat_template(
            [*messages, turn, *feedback],
            add_generation_prompt=True,
            tokenize=False,
            **self.chat_template_kwargs,
        )
        if text.count(_TURN_MARK) != 1:
            raise ContinuationError(
                "the chat template did not render an assistant message's content exactly once "
                f"(found {text.count(_TURN_MARK)} times), so the tokens between two turns cannot "
                "be cut out; multi-turn environments need a template that renders assistant "
                "messages (set the model's chat_template)"
            )
        tail = text.split(_TURN_MARK, 1)[1]
        if not all(m["content"] in tail for m in feedback if m.get("content")):
            raise ContinuationError(
                "the chat template rendered the feedback messages before the assistant's answer "
                "or not at all; multi-turn environments need a template that renders messages in "
                "order"
            )
        ids = self.encode_text(tail)
        if response_ids and ids and ids[0] == response_ids[-1] and self._special(ids[0]):
            ids = ids[1:]
        return ids

    def _special(self, token_id: int) -> bool:
        """A special token of the tokenizer (an EOS, an end of turn): never a piece of text."""
        if token_id in self.tokenizer.all_special_ids:
            return True
        added = getattr(self.tokenizer, "added_tokens_decoder", {}).get(token_id)
        return bool(added is not None and getattr(added, "special", False))

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

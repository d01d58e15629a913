"""data/prompting/render.py `PromptRenderer.continuation_ids`: the tokens between two model turns
(end of the assistant turn, the feedback, the next assistant header), cut out of the chat
template's own rendering, for the tiny model's ChatML template and Qwen-style templates (real
transformers tokenizers built locally: no download)."""

from __future__ import annotations

import copy

import pytest

from microcoder.data.prompting.render import ContinuationError, PromptRenderer

QWEN25_STYLE = (
    "{% if messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{% for m in messages %}"
    "{{ '<|im_start|>' + m['role'] + '\n' + m['content'] | trim + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""Qwen2.5's shape, written here: a default system turn, ChatML, stripped contents."""

QWEN3_STYLE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' and '</think>' in m['content'] %}"
    "{% set content = m['content'].split('</think>')[-1].lstrip('\n') %}"
    "{% else %}{% set content = m['content'] %}{% endif %}"
    "{{ '<|im_start|>' + m['role'] + '\n' + content + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}"
    "{{ '<think>\n\n</think>\n\n' }}{% endif %}{% endif %}"
)
"""Qwen3's shape, written here: earlier answers lose their reasoning, and `enable_thinking =
false` opens each answer with an empty think block."""

CONVERSATION = [
    {"role": "system", "content": "Solve it."},
    {"role": "user", "content": "Print the sum of two numbers."},
]
FEEDBACK = [{"role": "user", "content": "Wrong answer on input `1 2`: expected 3, got 12."}]
ANSWER = "```python\nprint(input())\n```"


def _tokenizer(tiny_tokenizer, template: str | None = None):
    tok = copy.deepcopy(tiny_tokenizer)
    if template is not None:
        tok.chat_template = template
    return tok


def _answer_ids(renderer: PromptRenderer, text: str, eos: bool) -> list[int]:
    ids = renderer.encode_text(text)
    return ids + [renderer.tokenizer.convert_tokens_to_ids("<|im_end|>")] if eos else ids


@pytest.mark.parametrize("template", [None, QWEN25_STYLE], ids=["tiny-chatml", "qwen25-style"])
def test_prompt_answer_and_continuation_are_the_templates_own_tokens(tiny_tokenizer, template):
    """prompt ids + the answer's sampled tokens (ending in EOS) + the continuation == the chat
    template's tokens of the whole conversation with the next assistant turn opened."""
    r = PromptRenderer(_tokenizer(tiny_tokenizer, template))
    answer = _answer_ids(r, ANSWER, eos=True)
    between = r.continuation_ids(CONVERSATION, FEEDBACK, answer)
    whole = r.chat_ids([*CONVERSATION, {"role": "assistant", "content": ANSWER}, *FEEDBACK])
    assert r.chat_ids(CONVERSATION) + answer + between == whole
    assert r.tokenizer.decode(between) == (
        "\n<|im_start|>user\n" + FEEDBACK[0]["content"] + "<|im_end|>\n<|im_start|>assistant\n"
    )


def test_an_answer_without_its_end_of_turn_gets_it_from_the_continuation(tiny_tokenizer):
    """A truncated answer (no EOS sampled): the continuation closes the turn itself."""
    r = PromptRenderer(_tokenizer(tiny_tokenizer))
    cut = _answer_ids(r, ANSWER, eos=False)
    between = r.continuation_ids(CONVERSATION, FEEDBACK, cut)
    assert r.tokenizer.decode(between[:1]) == "<|im_end|>"
    with_eos = r.continuation_ids(CONVERSATION, FEEDBACK, _answer_ids(r, ANSWER, eos=True))
    assert between[1:] == with_eos  # the EOS is never doubled


def test_qwen3_style_thinking_off_opens_the_next_turn_like_the_first(tiny_tokenizer):
    r = PromptRenderer(_tokenizer(tiny_tokenizer, QWEN3_STYLE), None, {"enable_thinking": False})
    answer_text = "<think>\n\n</think>\n\n" + ANSWER
    answer = _answer_ids(r, answer_text, eos=True)
    between = r.continuation_ids(CONVERSATION, FEEDBACK, answer)
    opening = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert r.tokenizer.decode(r.chat_ids(CONVERSATION)).endswith(opening)
    assert r.tokenizer.decode(between).endswith(FEEDBACK[0]["content"] + "<|im_end|>\n" + opening)
    # the answer's reasoning is the model's own tokens: never re-rendered (the template would
    # drop it from history)
    assert answer_text not in r.tokenizer.decode(between)


def test_a_template_that_drops_assistant_turns_is_refused(tiny_tokenizer):
    users_only = (
        "{% for m in messages %}{% if m['role'] != 'assistant' %}"
        "{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
        "{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )
    r = PromptRenderer(_tokenizer(tiny_tokenizer, users_only))
    with pytest.raises(ContinuationError, match="assistant message"):
        r.continuation_ids(CONVERSATION, FEEDBACK, [1])

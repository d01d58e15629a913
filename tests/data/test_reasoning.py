"""`prompt.reasoning = "auto"` resolved from a real tokenizer's chat template, per family."""

from __future__ import annotations

import copy

import pytest

from microcoder.data.config import PromptConfig
from microcoder.data.prompting.reasoning import resolve_reasoning

TURNS = (
    "{% for message in messages %}"
    "{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' }}"
    "{% endfor %}"
)
QWEN3_LIKE = (  # Qwen3: strips past reasoning; enable_thinking = false closes it in the prompt
    TURNS + "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\n\n</think>\n\n' }}{% endif %}{% endif %}"
)
R1_LIKE = (  # DeepSeek-R1 distills: the prompt opens the reasoning
    TURNS + "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n' }}{% endif %}"
)
MAGISTRAL_LIKE = (
    "{% for message in messages %}{{ message['content'].split('[/THINK]')[-1] }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '[ASSISTANT]' }}{% endif %}"
)


def with_template(tokenizer, template: str):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = template
    return tok


def test_tiny_model_template_does_not_reason(tiny_tokenizer):
    assert resolve_reasoning("auto", tiny_tokenizer) == "none"


def test_qwen3_like_template_thinks_unless_thinking_is_switched_off(tiny_tokenizer):
    tok = with_template(tiny_tokenizer, QWEN3_LIKE)
    assert resolve_reasoning("auto", tok) == "think"
    assert resolve_reasoning("auto", tok, {"enable_thinking": True}) == "think"
    assert resolve_reasoning("auto", tok, {"enable_thinking": False}) == "none"


def test_r1_like_template_thinks(tiny_tokenizer):
    assert resolve_reasoning("auto", with_template(tiny_tokenizer, R1_LIKE)) == "think"


def test_bracket_think_template_gets_its_marker(tiny_tokenizer):
    tok = with_template(tiny_tokenizer, MAGISTRAL_LIKE)
    assert resolve_reasoning("auto", tok) == "marker:[/THINK]"


@pytest.mark.parametrize("value", ["none", "think", "marker:<|end_reasoning|>"])
def test_an_explicit_value_is_kept(tiny_tokenizer, value):
    assert resolve_reasoning(value, with_template(tiny_tokenizer, QWEN3_LIKE)) == value


def test_prompt_config_refuses_an_unknown_value_naming_the_choices():
    assert PromptConfig().reasoning == "auto"
    assert PromptConfig(reasoning="marker:[/THINK]").reasoning == "marker:[/THINK]"
    with pytest.raises(ValueError, match='"none", "think"'):
        PromptConfig(reasoning="yes")


def test_each_known_marker_maps_to_a_mode_whose_end_is_that_marker():
    from microcoder.data.prompting.reasoning import REASONING_MARKERS
    from microcoder.sandbox.extract import reasoning_end

    assert all(reasoning_end(mode) == end for end, mode in REASONING_MARKERS.items())

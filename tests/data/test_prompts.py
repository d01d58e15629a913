"""The prompt layer's rendering: wording per kind and template, chat template, token ids."""

from __future__ import annotations

import pytest

from microcoder.data.config import PromptConfig
from microcoder.data.prompting.render import (
    PromptRenderer,
    chat_prompt_ids,
    measure_prompts,
    render_messages,
)

OLD_SYSTEM_PROMPT = (
    "Write a Python program that solves the problem. Reply with one ```python code block."
)
"""GeneratorConfig.system_prompt before the prompt layer: the warm start's rendering."""
LCB = PromptConfig(template="lcb")


def user(messages):
    assert messages[-1]["role"] == "user"
    return messages[-1]["content"]


def test_stdin_default_is_byte_identical_to_the_old_rendering(tiny_tokenizer, mixed_problems):
    p = mixed_problems["sum"]
    old = tiny_tokenizer.apply_chat_template(
        [{"role": "system", "content": OLD_SYSTEM_PROMPT}, {"role": "user", "content": p.prompt}],
        add_generation_prompt=True,
        return_dict=True,
    )["input_ids"]
    assert PromptRenderer(tiny_tokenizer).ids(p) == list(old)


def test_stdin_default_messages_are_the_statement_and_the_old_system_prompt(mixed_problems):
    p = mixed_problems["sum"]
    assert render_messages(p, PromptConfig()) == [
        {"role": "system", "content": OLD_SYSTEM_PROMPT},
        {"role": "user", "content": p.prompt},
    ]


def test_functional_prompt_shows_starter_code_and_function_name(mixed_problems):
    p = mixed_problems["two-sum"]
    text = user(render_messages(p, PromptConfig()))
    assert p.prompt in text
    assert "```python\n" + p.starter_code.rstrip() + "\n```" in text
    assert "`Solution().twoSum`" in text and "stdin" in text


def test_functional_prompt_without_starter_code_names_the_function(mixed_problems):
    text = user(render_messages(mixed_problems["square"], PromptConfig()))
    assert "`square`" in text and "```" not in text


def test_humaneval_style_assert_prompt_shows_the_signature_once(mixed_problems):
    p = mixed_problems["HumanEval/0"]
    text = user(render_messages(p, PromptConfig()))
    assert text.count("def add(x: int, y: int) -> int:") == 1
    assert "```python\n" + p.starter_code.rstrip() + "\n```" in text
    assert "`add`" in text


def test_leetcode_style_assert_prompt_shows_statement_and_starter_code(mixed_problems):
    p = mixed_problems["reverse-list"]
    text = user(render_messages(p, PromptConfig()))
    assert text.startswith(p.prompt)
    assert text.count("def reverseList(") == 1 and "`class Solution`" in text


def test_each_kind_has_its_own_system_prompt(mixed_problems):
    kinds = ("sum", "two-sum", "HumanEval/0")
    systems = {render_messages(mixed_problems[k], PromptConfig())[0]["content"] for k in kinds}
    assert len(systems) == 3


def test_system_override_replaces_only_its_kind(mixed_problems):
    cfg = PromptConfig(system={"functional": "Be brief."})
    assert render_messages(mixed_problems["two-sum"], cfg)[0]["content"] == "Be brief."
    assert render_messages(mixed_problems["sum"], cfg)[0]["content"] == OLD_SYSTEM_PROMPT


def test_empty_system_override_drops_the_system_message(mixed_problems):
    messages = render_messages(mixed_problems["sum"], PromptConfig(system={"stdin": ""}))
    assert [m["role"] for m in messages] == ["user"]


LCB_SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification) "
    "and will generate a correct Python program that matches the specification and passes all "
    "tests."
)
LCB_ANSWER = "### Answer: (use the provided format with backticks)\n\n"


def test_lcb_stdin_prompt_is_livecodebenchs_wording(mixed_problems):
    p = mixed_problems["sum"]
    messages = render_messages(p, LCB)
    assert messages[0] == {"role": "system", "content": LCB_SYSTEM}
    assert user(messages) == (
        f"### Question:\n{p.prompt}\n\n### Format: Read the inputs from stdin solve the problem "
        "and write the answer to stdout (do not directly test on the sample inputs). Enclose "
        "your code within delimiters as follows. Ensure that when the python program runs, it "
        "reads the inputs, runs the algorithm and writes output to STDOUT.\n"
        "```python\n# YOUR CODE HERE\n```\n\n" + LCB_ANSWER
    )


def test_lcb_functional_prompt_is_livecodebenchs_starter_code_wording(mixed_problems):
    p = mixed_problems["two-sum"]
    assert user(render_messages(p, LCB)) == (
        f"### Question:\n{p.prompt}\n\n### Format: You will use the following starter code to "
        "write the solution to the problem and enclose your code within delimiters.\n"
        f"```python\n{p.starter_code}\n```\n\n" + LCB_ANSWER
    )


def test_lcb_humaneval_prompt_shows_the_signature_once(mixed_problems):
    text = user(render_messages(mixed_problems["HumanEval/0"], LCB))
    assert text.count("def add(x: int, y: int) -> int:") == 1 and text.endswith(LCB_ANSWER)


@pytest.mark.parametrize("pid", ["sum", "two-sum", "square", "HumanEval/0", "reverse-list"])
@pytest.mark.parametrize("template", ["default", "lcb"])
def test_ids_equal_encoded_text_and_chat_prompt_ids(tiny_tokenizer, mixed_problems, pid, template):
    r = PromptRenderer(tiny_tokenizer, PromptConfig(template=template))
    p = mixed_problems[pid]
    ids = r.ids(p)
    assert ids == r.encode_text(r.text(p))
    assert ids == chat_prompt_ids(tiny_tokenizer, render_messages(p, r.cfg))
    assert r.text(p).endswith("<|im_start|>assistant\n")


THINKING_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}{{ 'NO-THINK\n' }}{% endif %}"
    "{% endif %}"
)


@pytest.fixture
def thinking_tokenizer(tiny_tokenizer):
    import copy

    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = THINKING_TEMPLATE
    return tok


def test_chat_template_kwargs_reach_the_chat_template(thinking_tokenizer, mixed_problems):
    p = mixed_problems["sum"]
    plain = PromptRenderer(thinking_tokenizer)
    off = PromptRenderer(thinking_tokenizer, chat_template_kwargs={"enable_thinking": False})
    assert not plain.text(p).endswith("NO-THINK\n")
    assert off.text(p).endswith("<|im_start|>assistant\nNO-THINK\n")
    assert off.ids(p) == off.encode_text(off.text(p)) != plain.ids(p)


def test_chat_template_kwargs_that_are_apply_chat_template_parameters_are_refused(
    tiny_tokenizer,
):
    with pytest.raises(ValueError, match="'tokenize'.*remove them"):
        PromptRenderer(tiny_tokenizer, chat_template_kwargs={"tokenize": False})


def test_measure_prompts_skips_only_prompts_over_the_limit(tiny_tokenizer, mixed_problems):
    r = PromptRenderer(tiny_tokenizer)
    problems = list(mixed_problems.values())
    lengths = [len(r.ids(p)) for p in problems]
    limit = sorted(lengths)[2]
    calls = []
    got = measure_prompts(r, problems, limit, progress=lambda d, t: calls.append((d, t)), chunk=2)
    assert [m.problem.id for m in got.kept] == [
        p.id for p, n in zip(problems, lengths, strict=True) if n <= limit
    ]
    assert [m.tokens for m in got.skipped] == [n for n in lengths if n > limit]
    assert all(m.text == r.text(m.problem) for m in got.kept + got.skipped)
    assert calls == [(2, 5), (4, 5), (5, 5)]


def test_a_problem_of_unknown_kind_is_an_error_naming_it(mixed_problems):
    import dataclasses

    odd = dataclasses.replace(mixed_problems["sum"], kind="sql")
    with pytest.raises(ValueError, match="problem sum: kind 'sql'"):
        render_messages(odd, PromptConfig())

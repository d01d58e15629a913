"""Code extraction from model responses: the final answer after the reasoning, its fence."""

from __future__ import annotations

import pytest

from microcoder.data.prompting.reasoning import check_reasoning
from microcoder.sandbox import Extraction, extract, extract_code

DRAFT = "a, b = map(int, input().split())\nprint(a + b)\n"
FINAL = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```\n"


# ------------------------------------------------------------------ no reasoning ("none")


def test_takes_the_last_python_block():
    text = "try:\n```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```\n```text\nout\n```"
    assert extract_code(text) == "print(2)\n"


def test_falls_back_to_the_last_fenced_block_of_any_language():
    assert extract_code("```\nx = 1\n```\nthen\n```cpp\nint main(){}\n```") == "int main(){}\n"


@pytest.mark.parametrize("lang", ["python", "py", "python3", "Python", "cpp", ""])
def test_each_language_fence_is_read(lang):
    found = extract("Solution:\n" + fenced(FINAL, lang) + "Done.")
    assert (found.status, found.code) == ("ok", FINAL)


def test_python_block_wins_over_a_later_block_of_another_language():
    text = fenced(FINAL, "py") + "Output:\n" + fenced("3\n", "")
    assert extract_code(text) == FINAL


def test_whole_text_when_there_is_no_fence():
    assert extract_code("print(input())") == "print(input())"


def test_unclosed_final_fence_is_unfinished_not_the_open_block():
    found = extract("Here:\n```python\nprint(1)\nprint(")
    assert (found.status, found.code) == ("unfinished", None)
    assert "not closed" in found.reason


@pytest.mark.parametrize("lang", ["python", "py", "cpp", ""])
def test_unclosed_final_fence_is_never_replaced_by_an_earlier_closed_block(lang):
    text = "First try:\n" + fenced(DRAFT, lang) + "Better:\n```" + lang + "\n" + FINAL[:20]
    found = extract(text)
    assert (found.status, found.code) == ("unfinished", None)


def test_a_fence_line_with_a_language_inside_a_block_does_not_close_it():
    text = "```python\nx = '''\n```python\n'''\nprint(x)\n```\n"
    assert extract_code(text) == "x = '''\n```python\n'''\nprint(x)\n"


def test_no_code_is_none():
    assert extract("").status == "no_code"
    assert extract_code("") is None
    assert extract_code("```python\n\n```") is None


# ------------------------------------------------------------------ reasoning ("think")

THINKING_DRAFT = "<think>\nLet me try:\n" + fenced(DRAFT) + "That works, but shorter is\n"


def test_think_answer_after_the_reasoning_wins_over_a_closed_draft_inside_it():
    text = THINKING_DRAFT + "</think>\n\nFinal:\n" + fenced(FINAL)
    assert extract(text, "think") == Extraction(FINAL, "ok")


def test_think_final_fence_unclosed_does_not_fall_back_to_the_reasoning_draft():
    text = THINKING_DRAFT + "</think>\n\nFinal:\n```python\n" + FINAL[:25]
    found = extract(text, "think")
    assert (found.status, found.code) == ("unfinished", None)


def test_think_cut_inside_the_reasoning_is_unfinished_even_with_a_closed_draft():
    found = extract(THINKING_DRAFT, "think")
    assert (found.status, found.code) == ("unfinished", None)
    assert "</think>" in found.reason


def test_think_cut_inside_the_reasoning_without_any_fence_is_unfinished():
    """The prompt opened the reasoning (R1's template ends with <think>): no tag in the reply."""
    found = extract("We need to add two numbers. First read the input, then", "think")
    assert found.status == "unfinished"


def test_think_closed_reasoning_then_plain_text_answer():
    assert extract_code("<think>easy</think>\nprint(input())", "think") == "\nprint(input())"


def test_think_closed_reasoning_and_no_answer_is_no_code():
    assert extract("<think>\nhmm\n" + fenced(DRAFT) + "</think>\n\n", "think").status == "no_code"


def test_think_answer_in_another_language_fence():
    text = "<think>\n" + fenced("x\n") + "</think>\n" + fenced("int main(){}\n", "cpp")
    assert extract_code(text, "think") == "int main(){}\n"


def test_marker_mode_uses_its_own_end_marker():
    text = "[THINK]\n" + fenced(DRAFT) + "[/THINK]\n" + fenced(FINAL, "py")
    assert extract_code(text, "marker:[/THINK]") == FINAL
    assert extract("[THINK]\n" + fenced(DRAFT), "marker:[/THINK]").status == "unfinished"


def test_none_mode_ignores_think_tags():
    text = THINKING_DRAFT + "</think>\n```python\n" + FINAL[:10]
    assert extract(text, "none").status == "unfinished"  # the final fence is still open
    assert extract_code(THINKING_DRAFT, "none") == DRAFT  # no reasoning: the draft is the answer


def test_auto_decides_per_reply_when_unresolved():
    assert extract(THINKING_DRAFT, "auto").status == "unfinished"
    assert extract_code(fenced(FINAL), "auto") == FINAL


def test_bad_reasoning_value_names_the_choices():
    with pytest.raises(ValueError, match="marker:END"):
        check_reasoning("thinking")
    with pytest.raises(ValueError):
        check_reasoning("marker:")


# ------------------------------------------------------------------ known truncation


def test_truncated_without_a_closed_block_is_unfinished():
    assert extract("print(input())", truncated=True).status == "unfinished"
    assert extract("<think>x</think>\n", "think", truncated=True).status == "unfinished"
    assert extract("print(input())", truncated=False).code == "print(input())"


def test_truncated_after_a_closed_final_block_is_judged():
    text = "<think>\n" + fenced(DRAFT) + "</think>\n" + fenced(FINAL) + "This reads all inp"
    assert extract(text, "think", truncated=True) == Extraction(FINAL, "ok")

"""Code extraction from model responses."""

from __future__ import annotations

from microcoder.sandbox import extract_code


def test_takes_the_last_python_block():
    text = "try:\n```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```\n```text\nout\n```"
    assert extract_code(text) == "print(2)\n"


def test_falls_back_to_the_last_fenced_block_of_any_language():
    assert extract_code("```\nx = 1\n```\nthen\n```cpp\nint main(){}\n```") == "int main(){}\n"


def test_whole_text_when_there_is_no_fence():
    assert extract_code("print(input())") == "print(input())"


def test_truncated_response_yields_the_open_block():
    assert extract_code("Here:\n```python\nprint(1)\nprint(") == "print(1)\nprint("


def test_no_code_is_none():
    assert extract_code("") is None
    assert extract_code("```python\n\n```") is None

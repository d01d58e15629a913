"""The repair environment's feedback text (actors/environments/feedback.py): each part cut to
`environment.feedback_chars` with head and tail kept, what each kind shows, never a test the
program was not run on."""

from __future__ import annotations

import pytest

from microcoder.actors.environments.feedback import CUT_MARK, cut, feedback_text, no_program_text
from microcoder.data.problem import Problem
from microcoder.protocol import ProgramRun


@pytest.mark.parametrize("chars", [32, 33, 40, 100, 401])
def test_cut_keeps_head_and_tail_within_the_limit_and_says_how_much_went(chars):
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    out = cut(text, chars)
    assert len(out) <= chars
    head, _, rest = out.partition("\n[... ")
    gone = int(rest.split(" ", 1)[0])
    tail = rest.split(" chars cut]\n", 1)[1]
    assert text.startswith(head) and text.endswith(tail) and head
    assert len(head) + len(tail) + gone == len(text)  # the marker names exactly what was cut
    assert abs(len(head) - len(tail)) <= 1
    assert cut(text[:chars], chars) == text[:chars]  # short enough: untouched


def test_cut_below_the_marker_keeps_only_the_marker():
    assert cut("x" * 500, 5) == CUT_MARK.format(500)


STDIN = Problem(
    "p",
    "stdin",
    "Add two numbers.",
    [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n" + "9 " * 400, "output": "10\n"}],
)


def test_a_stdin_failure_shows_the_failing_test_output_and_stderr_each_cut():
    run = ProgramRun(
        "WA",
        1,
        2,
        first_failed=1,
        message="line 1: expected '10', got '11'",
        stdout="11\n",
        stderr="Traceback: " + "e" * 500,
    )
    text = feedback_text(STDIN, run, chars=64)
    assert "visible test 2 of 2: wrong answer (WA)" in text
    assert "Input:\n```\n5 5\n9 9" in text and "chars cut" in text
    assert "Expected output:\n```\n10\n```" in text
    assert "Your output:\n```\n11\n```" in text
    assert "Judge's reason:\n```\nline 1: expected '10', got '11'\n```" in text
    assert "Stderr:\n```\nTraceback" in text and "e" * 65 not in text
    assert text.endswith("whole corrected program in one ```python block.")
    assert "1 2" not in text  # the passing test is not shown


def test_a_functional_failure_shows_arguments_and_expected_value():
    p = Problem("f", "functional", "Twice.", [{"input": "4", "output": "8"}], fn_name="twice")
    run = ProgramRun("WA", 0, 1, first_failed=0, message="expected 8, got 9", stdout="debug\n")
    text = feedback_text(p, run, chars=400)
    assert "Arguments (one JSON value per line):\n```\n4\n```" in text
    assert "Expected return value:\n```\n8\n```" in text
    assert "Your program printed:\n```\ndebug\n```" in text and "got 9" in text


def test_an_assert_failure_shows_the_failing_check():
    p = Problem("a", "assert", "f", [{"code": "assert f(1) == 2"}, {"code": "assert f(2) == 4"}])
    run = ProgramRun("WA", 1, 2, first_failed=1, message="AssertionError")
    text = feedback_text(p, run, chars=400)
    assert "The failing check:\n```\nassert f(2) == 4\n```" in text
    assert "assert f(1) == 2" not in text and "runtime error" not in text


def test_a_compile_error_shows_the_reason_and_asks_for_the_language_fence():
    p = Problem("c", "stdin", "Add.", [{"input": "1 2\n", "output": "3\n"}], language="cpp")
    run = ProgramRun("CE", 0, 1, first_failed=0, message="main.cpp:1: error: expected ';'")
    text = feedback_text(p, run, chars=400)
    assert "compilation error (CE)" in text and "expected ';'" in text
    assert "Input:" not in text and text.endswith("one ```cpp block.")


def test_no_program_names_the_fence():
    assert "```java block" in no_program_text("java", "no code found in the response")

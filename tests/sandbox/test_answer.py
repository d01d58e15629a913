"""The `answer` kind's shipped reward (sandbox/rewards/answer.py): the reply's final answer, normalised,
against the expected one; scored by actors/scoring.py without the sandbox."""

from __future__ import annotations

import pytest

from microcoder.actors.scoring import score_groups
from microcoder.data.problem import validate_problem
from microcoder.protocol import Group, Response
from microcoder.sandbox.rewards.answer import exact_answer, final_answer, normalise
from microcoder.sandbox.rewards.plugin import judge_or_answer


def answer_problem(expected: str, pid: str = "q"):
    tests = [{"input": "", "output": expected}]
    return validate_problem({"id": pid, "kind": "answer", "prompt": "?", "tests": tests})


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("0.5", "1/2"),
        (".5", "1/2"),
        ("2/4", "0.5"),
        ("3", "3.0"),
        ("3.", "3"),
        (" 42 ", "42"),
        ("\\boxed{7}", "7"),
        ("$7$", "7"),
        ("\\frac{1}{4}", "0.25"),
        ("\\dfrac{3}{6}", "1/2"),
        ("1,000", "1000"),
        ("-2.50", "-5/2"),
        ("Paris.", "paris"),
        ("New   York", "new york"),
    ],
)
def test_equal_answers_normalise_alike(a, b):
    assert normalise(a) == normalise(b)


@pytest.mark.parametrize(
    ("a", "b"), [("0.5", "0.51"), ("1/3", "0.33"), ("50%", "0.5"), ("x = 3", "3"), ("12", "1,2")]
)
def test_different_answers_stay_different(a, b):
    assert normalise(a) != normalise(b)


@pytest.mark.parametrize(
    ("reply", "want"),
    [
        ("Add them: 2 + 5 = 7.\n\\boxed{7}", ("7", True)),
        ("\\boxed{3} is wrong, so \\boxed{\\frac{1}{2}}", ("\\frac{1}{2}", True)),
        ("2 + 5 = 7\n#### 7", (" 7", True)),
        ("So the answer: 12 apples\nthanks 3", (" 12 apples", True)),
        ("she has 2, then 5, so 7 in all", ("7", False)),
        ("<think>2 + 5 = 7</think>It is \\boxed{7}", ("7", True)),
        ("<think>maybe \\boxed{7} or", ("", False)),
        ("\\boxed{7", ("7", False)),  # an unclosed box is not an answer; the last number is
        ("no numbers here\n\n", ("no numbers here", False)),
    ],
)
def test_the_final_answer_is_boxed_then_marked_then_the_last_number(reply, want):
    assert final_answer(reply) == want


def test_exact_answer_rewards_1_only_for_the_right_final_answer():
    half = answer_problem("1/2")
    assert exact_answer(half, "1 of 2 slices: \\boxed{0.5}") == (1.0, {"formatted": 1.0})
    assert exact_answer(half, "1 of 2 slices, so 1/2") == (1.0, {"formatted": 0.0})
    assert exact_answer(half, "\\boxed{0.5} no wait \\boxed{2}") == (0.0, {"formatted": 1.0})
    assert exact_answer(half, "<think>it is \\boxed{1/2}") == (0.0, {"formatted": 0.0})
    assert exact_answer(half, "") == (0.0, {"formatted": 0.0})
    assert judge_or_answer(half, "\\boxed{1/2}", None) == (1.0, {"formatted": 1.0})


class NoSandbox:
    """A pool that must not be used: answer problems are never run."""

    def submit(self, *args, **kwargs):
        raise AssertionError("an answer problem reached the sandbox")

    def as_completed(self):
        return iter(())


def test_answer_groups_are_scored_without_the_sandbox_ac_by_the_reward():
    seven = answer_problem("7", pid="seven")
    texts = ["\\boxed{7}", "\\boxed{8}", "7", "<think>\\boxed{7}"]
    group = Group(1, "seven", responses=[Response(None, None, t) for t in texts])
    out = score_groups(NoSandbox(), {"seven": seven}, [group], "ex")
    assert out.failed == [] and out.tests_run == 0
    got = [(s.verdict, s.reward, s.tests_passed, s.tests_total) for s in out.scored[0].scores]
    assert got == [("AC", 1.0, 1, 1), ("WA", 0.0, 0, 1), ("AC", 1.0, 1, 1), ("WA", 0.0, 0, 1)]
    assert [s.components["formatted"] for s in out.scored[0].scores] == [1.0, 1.0, 0.0, 0.0]


def test_the_sandbox_refuses_an_answer_problem_naming_the_reward(pool):
    with pytest.raises(ValueError, match="not a program the sandbox runs.*executor.reward"):
        pool.submit(answer_problem("7"), "print(7)")

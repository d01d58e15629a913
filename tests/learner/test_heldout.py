"""Held-out pass rate: extraction, sandbox judging, counting (fakes only where marked unit)."""

from __future__ import annotations

import pytest

from microcoder.data.synthetic.tasks import generate_tasks
from microcoder.learner.heldout import heldout_eval, heldout_pass_rate
from microcoder.learner.warmstart.examples import response_text
from microcoder.sandbox import JudgePool

PROBLEMS = generate_tasks(0, "heldout", 6)


def fenced(p) -> str:
    return response_text(p.meta["solution"])


def test_unit_no_code_counts_as_failure_without_reaching_the_judge():
    judged = []

    def judge(pairs):
        judged.extend(pairs)
        return [1.0] * len(pairs)

    replies = ["```python\nprint(1)\n```", "", "   "]
    r = heldout_eval(lambda ps: replies, PROBLEMS[:3], judge)
    assert (r.passed, r.scored, r.no_code) == (1, 3, 2)
    assert [c for _, c in judged] == ["print(1)\n"]


def test_unit_unfinished_replies_fail_without_reaching_the_judge():
    judged = []

    def judge(pairs):
        judged.extend(pairs)
        return [1.0] * len(pairs)

    draft = "<think>\n```python\nprint(1)\n```\n"
    replies = [
        draft,
        draft + "</think>\n```python\nprint(",
        draft + "</think>\n```py\nprint(2)\n```",
    ]
    r = heldout_eval(lambda ps: replies, PROBLEMS[:3], judge, reasoning="think")
    assert (r.passed, r.scored, r.unfinished, r.no_code) == (1, 3, 2, 0)
    assert [c for _, c in judged] == ["print(2)\n"]


def test_unit_sandbox_faults_are_left_out_of_the_rate():
    r = heldout_eval(lambda ps: ["x = 1"] * 4, PROBLEMS[:4], lambda pairs: [1.0, None, 0.0, 1.0])
    assert (r.sandbox_faults, r.scored, r.pass_rate) == (1, 3, pytest.approx(2 / 3))


def test_unit_generator_returning_wrong_count_is_an_error():
    with pytest.raises(ValueError, match="2 replies for 3 problems"):
        heldout_eval(lambda ps: ["a", "b"], PROBLEMS[:3], lambda pairs: [0.0] * len(pairs))


@pytest.fixture(scope="module")
def sandbox_judge():
    with JudgePool(workers=2) as pool:
        yield lambda pairs: [v.reward for v in pool.judge_many(pairs)]


def test_canonical_solutions_pass_in_the_sandbox(sandbox_judge):
    assert heldout_pass_rate(lambda ps: [fenced(p) for p in ps], PROBLEMS, sandbox_judge) == 1.0


def test_half_wrong_replies_give_half_in_the_sandbox(sandbox_judge):
    def generate(ps):
        return [fenced(p) if i % 2 else "```python\nprint('no')\n```" for i, p in enumerate(ps)]

    assert heldout_pass_rate(generate, PROBLEMS, sandbox_judge) == 0.5

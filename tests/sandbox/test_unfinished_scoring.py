"""An unfinished response gets reward 0 through the real scoring path: actors/scoring.py's
score_groups on a real bwrap JudgePool (tests/sandbox/conftest.py), as an executor scores."""

from __future__ import annotations

import numpy as np

from microcoder.actors.scoring import score_groups
from microcoder.data.problem import validate_problem
from microcoder.protocol import Group, Response

SUM = validate_problem(
    {"id": "sum", "kind": "stdin", "tests": [{"input": "1 2\n", "output": "3\n"}]}
)
SUM_OK = "a, b = map(int, input().split())\nprint(a + b)\n"

WRONG = "a, b = map(int, input().split())\nprint(a - b)\n"
DRAFT_IN_REASONING = f"<think>\nRead two ints and add them:\n```python\n{SUM_OK}```\nIt works. Now"


def group(texts: list[str], truncated: list[bool] | None = None) -> Group:
    cut = truncated if truncated is not None else [True] * len(texts)
    return Group(
        group_id=7,
        problem_id=SUM.id,
        prompt="p",
        prompt_ids=np.array([1], np.int32),
        responses=[
            Response(np.array([1], np.int32), np.array([-1.0], np.float32), text=t, truncated=c)
            for t, c in zip(texts, cut, strict=True)
        ],
    )


def scores(pool, texts: list[str], reasoning: str = "think", truncated=None):
    out = score_groups(pool, {SUM.id: SUM}, [group(texts, truncated)], "exec-test", reasoning)
    assert out.failed == []
    return [(s.verdict, s.reward) for s in out.scored[0].scores]


def test_truncated_thinking_response_whose_closed_draft_would_pass_gets_reward_0(pool):
    cut_in_reasoning = DRAFT_IN_REASONING
    cut_in_final_fence = DRAFT_IN_REASONING + " write it out.\n</think>\n\n```python\na, b ="
    finished = DRAFT_IN_REASONING + " done.\n</think>\n\n```python\n" + SUM_OK + "```\n"
    wrong_final = DRAFT_IN_REASONING + " done.\n</think>\n\n```py\n" + WRONG + "```\n"
    got = scores(pool, [cut_in_reasoning, cut_in_final_fence, finished, wrong_final])
    assert got == [("unfinished", 0.0), ("unfinished", 0.0), ("AC", 1.0), ("WA", 0.0)]


def test_unclosed_final_fence_without_reasoning_is_unfinished(pool):
    draft_then_cut = f"```python\n{SUM_OK}```\nShorter:\n```python\nimport sys\nprint(sum("
    assert scores(pool, [draft_then_cut, f"```python\n{SUM_OK}```\n"], "none") == [
        ("unfinished", 0.0),
        ("AC", 1.0),
    ]


def test_a_truncated_reply_without_a_closed_block_is_unfinished_whatever_it_holds(pool):
    """The executor knows the reply hit the cap (Response.truncated): unfenced code, or an
    empty answer after the reasoning, was cut. The same text, not truncated, is judged."""
    empty_answer = "<think>\nadd them\n</think>\n\n"
    assert scores(pool, [SUM_OK, SUM_OK], "none", [True, False]) == [
        ("unfinished", 0.0),
        ("AC", 1.0),
    ]
    assert scores(pool, [empty_answer, empty_answer], "think", [True, False]) == [
        ("unfinished", 0.0),
        ("WA", 0.0),  # finished with no code: WA, as before
    ]


def test_each_score_says_what_extraction_gave_the_judge(pool):
    """The extraction outcome travels with the score (Score.extraction), so the step's verdict
    metrics count a response with no code apart from a wrong program (both are WA)."""
    out = score_groups(
        pool,
        {SUM.id: SUM},
        [group([DRAFT_IN_REASONING, "</think>\n\n", "</think>\n" + WRONG], [True, False, False])],
        "exec-test",
        "think",
    )
    got = [(s.verdict, s.extraction) for s in out.scored[0].scores]
    assert got == [("unfinished", "unfinished"), ("WA", "no_code"), ("WA", "ok")]

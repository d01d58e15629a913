"""A trajectory rewarded by its (user) environment (`Response.env_reward`) is scored with that
reward and never judged; the other responses of the group are judged as before (a real
sandbox pool)."""

from __future__ import annotations

import pytest

from microcoder.actors.scoring import score_groups
from microcoder.data.problem import validate_problem
from microcoder.protocol import Group, Response
from microcoder.sandbox import JudgePool

SUM = validate_problem(
    {"id": "sum", "kind": "stdin", "tests": [{"input": "1 2\n", "output": "3\n"}]}
)
OK = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\nprint(0)\n```"


class CountingPool:
    """The real pool, counting what was submitted to it."""

    def __init__(self, pool):
        self.pool, self.submitted = pool, []

    def submit(self, problem, code, **kw):
        self.submitted.append(kw["tag"])
        self.pool.submit(problem, code, **kw)

    def as_completed(self):
        return self.pool.as_completed()


@pytest.fixture(scope="module")
def pool():
    with JudgePool(workers=2, time_limit_s=2.0) as p:
        yield p


def test_env_rewards_are_the_scores_and_nothing_else_is_judged_for_them(pool):
    responses = [
        Response(None, None, OK),  # judged: AC
        Response(None, None, OK, env_reward=0.25),  # right code, but the environment says 0.25
        Response(None, None, WRONG, env_reward=1.0),  # wrong code, the environment says 1
        Response(None, None, WRONG),  # judged: WA
    ]
    counting = CountingPool(pool)
    out = score_groups(counting, {"sum": SUM}, [Group(1, "sum", responses=responses)], "ex")
    assert out.failed == []
    s = out.scored[0].scores
    assert [(x.verdict, x.reward) for x in s] == [
        ("AC", 1.0),
        ("WA", 0.25),
        ("AC", 1.0),
        ("WA", 0.0),
    ]
    assert [(x.tests_passed, x.tests_total, x.detail) for x in s[1:3]] == [
        (0, 1, "env_reward"),
        (1, 1, "env_reward"),
    ]
    assert sorted(counting.submitted) == [(1, 0), (1, 3)]

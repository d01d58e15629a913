"""Rewards users plug in (`executor.reward = "module:function"`, sandbox/rewards/plugin.py): the path
is checked when the config loads, the function scores every response after the real sandbox
judged it, its named components travel with the scores, and a function that raises fails only
its group, counted, while the executor goes on judging."""

from __future__ import annotations

import textwrap

import pytest
from pydantic import ValidationError

from microcoder.actors.executor import Executor
from microcoder.actors.scoring import score_groups
from microcoder.buffer.codec import read_scores, scores_frame
from microcoder.data.problem import validate_problem
from microcoder.learner.verdict_stats import reward_component_means
from microcoder.protocol import Group, GroupScores, Response, Score
from microcoder.sandbox import ExecutorConfig, JudgePool, Verdict
from microcoder.sandbox.rewards.plugin import RewardError, check_reward, resolve_reward

SUM = validate_problem(
    {"id": "sum", "kind": "stdin", "tests": [{"input": "1 2\n", "output": "3\n"}]}
)
BAD = validate_problem(
    {"id": "bad", "kind": "stdin", "tests": [{"input": "1 2\n", "output": "3\n"}]}
)
OK = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\nprint(0)\n```"

USER_REWARDS = textwrap.dedent(
    '''
    def shaped(problem, response, verdict):
        """The judge's reward, plus a length component and a bonus for AC."""
        bonus = 0.5 if verdict.verdict == "AC" else 0.0
        return verdict.reward + bonus, {"chars": float(len(response)), "bonus": bonus}

    def flaky(problem, response, verdict):
        if problem.id == "bad":
            raise KeyError("no rubric for this problem")
        return verdict.reward
    '''
)


class ListClient:
    """A buffer client that leases the given groups, then none; records what comes back."""

    def __init__(self, groups: list[Group]):
        self.queue, self.scored, self.failed = list(groups), [], []

    def get_unscored(self, n: int, wait_s: float = 0.0) -> list[Group]:
        got, self.queue = self.queue[:n], self.queue[n:]
        return got

    def put_scored(self, scores) -> None:
        self.scored += scores

    def fail_group(self, group_id: int, reason: str) -> None:
        self.failed.append((group_id, reason))


@pytest.fixture(scope="module")
def pool():
    with JudgePool(workers=2, time_limit_s=2.0) as p:
        yield p


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "user_rewards.py").write_text(USER_REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_rewards"


def group(gid: int, problem_id: str, texts: list[str]) -> Group:
    return Group(gid, problem_id, responses=[Response(None, None, t) for t in texts])


def test_a_bad_reward_path_is_refused_when_the_config_loads_naming_the_fix(user_module):
    with pytest.raises(
        ValidationError, match="executor.reward: no module 'nowhere_mod'.*pkg.mod:func"
    ):
        ExecutorConfig(reward="nowhere_mod:f")
    with pytest.raises(ValidationError, match="is not an import path"):
        ExecutorConfig(reward="user_rewards.flaky")
    with pytest.raises(ValidationError, match="has no 'missing'"):
        ExecutorConfig(reward="user_rewards:missing")
    assert ExecutorConfig(reward="user_rewards:flaky").reward == "user_rewards:flaky"
    default = resolve_reward(ExecutorConfig().reward)  # the code judge, as before
    assert default(SUM, OK, Verdict("AC", 1, 1, reward=1.0)) == 1.0
    assert default(SUM, OK, Verdict("WA", 0, 1, reward=0.0)) == 0.0


@pytest.mark.parametrize(
    ("value", "want"),
    [(1, (1.0, {})), (0.25, (0.25, {})), ((1.0, {"f": 2}), (1.0, {"f": 2.0}))],
)
def test_a_reward_is_a_number_or_a_number_and_named_components(value, want):
    assert check_reward(value) == want


@pytest.mark.parametrize(
    "value", ["1", None, True, float("nan"), (1.0,), (1.0, [1]), (1.0, {"f": "x"}), (1.0, {2: 1.0})]
)
def test_anything_else_is_not_a_reward(value):
    with pytest.raises(RewardError):
        check_reward(value)


def test_the_function_scores_each_judged_response_and_its_components_ride_the_scores(
    pool, user_module
):
    fn = resolve_reward(f"{user_module}:shaped")
    out = score_groups(pool, {"sum": SUM}, [group(1, "sum", [OK, WRONG])], "ex", reward_fn=fn)
    assert out.failed == [] and out.reward_errors == 0
    s = out.scored[0].scores
    assert [(x.verdict, x.reward) for x in s] == [("AC", 1.5), ("WA", 0.0)]
    assert s[0].components == {"chars": float(len(OK)), "bonus": 0.5}
    back = read_scores(scores_frame(out.scored[0]))  # the wire: msgpack, no pickle
    assert [x.components for x in back.scores] == [x.components for x in s]
    assert reward_component_means(x.components for x in back.scores) == {
        "reward_components": {"bonus": 0.25, "chars": (len(OK) + len(WRONG)) / 2}
    }


def test_scores_without_components_decode_as_before():
    frame = scores_frame(GroupScores(3, [Score(1.0, "AC")], "ex"))
    assert read_scores(frame).scores[0].components == {}
    assert reward_component_means([{}, {}]) == {}


def test_a_raising_function_fails_its_group_counted_and_the_executor_keeps_judging(
    pool, user_module, capfd
):
    """A real Executor (no buffer, no Ray) on a real sandbox pool: 6 groups, the 2nd and 5th
    on the problem the function raises on."""
    ex = Executor("exec-r", ExecutorConfig(workers=2, reward=f"{user_module}:flaky"))
    try:
        ex.problems = {"sum": SUM, "bad": BAD}
        ids = ["sum", "bad", "sum", "sum", "bad", "sum"]
        ex.client = ListClient([group(i, pid, [OK, WRONG]) for i, pid in enumerate(ids)])
        ex.run(max_groups=6)
        assert sorted(gs.group_id for gs in ex.client.scored) == [0, 2, 3, 5]
        assert [gid for gid, _ in sorted(ex.client.failed)] == [1, 4]
        assert all("KeyError" in reason for _, reason in ex.client.failed)
        assert (ex.reward_errors, ex.failed, ex.groups) == (2, 2, 4)
        assert "problem bad" in capfd.readouterr().err
    finally:
        ex.client = None
        ex.shutdown()


def test_the_executor_refuses_to_start_on_a_reward_it_cannot_import():
    cfg = ExecutorConfig.model_construct(reward="nowhere_mod:f")  # as if edited after loading
    with pytest.raises(ValueError, match="executor.reward: no module 'nowhere_mod'"):
        Executor("exec-x", cfg)

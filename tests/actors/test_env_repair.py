"""The repair environment (actors/environments/repair.py) on a real sandbox: a JudgePool judges
each turn's program on the visible tests only; a failure gives feedback while turns remain, a
pass or the last turn ends the trajectory, a judge fault ends it without feedback, and a
hidden test never reaches the model."""

from __future__ import annotations

import pytest

from microcoder.actors.environments.base import EnvContext, build_environment
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.actors.environments.executor_sandbox import program_run_of, sandbox_error
from microcoder.actors.environments.repair import Repair, visible_tests
from microcoder.data.problem import Problem
from microcoder.protocol import ProgramRun
from microcoder.sandbox import JudgePool

HIDDEN = "31337 1\n"
ADD = Problem(
    "add",
    "stdin",
    "Print the sum of two integers.",
    [
        {"input": "1 2\n", "output": "3\n"},
        {"input": "2 2\n", "output": "4\n"},
        {"input": HIDDEN, "output": "31338\n"},
    ],
)
RIGHT = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"
HIDDEN_ONLY = "```python\na, b = map(int, input().split())\nprint(a + b if a < 100 else 0)\n```"


class PoolSandbox:
    """EnvSandbox on a local JudgePool (the executor's pool without Ray); records each run."""

    def __init__(self, pool: JudgePool):
        self.pool = pool
        self.runs: list[tuple[Problem, str | None]] = []

    def run(self, problem: Problem, code: str | None) -> ProgramRun:
        self.runs.append((problem, code))
        return program_run_of(self.pool.judge(problem, code))


@pytest.fixture(scope="module")
def pool():
    with JudgePool(workers=1, time_limit_s=2.0) as p:
        yield p


def repair(sandbox, **cfg) -> Repair:
    prompt = lambda p: [{"role": "user", "content": p.prompt}]  # noqa: E731
    context = EnvContext(EnvironmentConfig(kind="repair", **cfg), sandbox, prompt)
    env = build_environment(context)
    assert type(env) is Repair
    return env


def test_a_failing_turn_gets_feedback_on_the_visible_test_and_the_next_ends_it(pool):
    sandbox = PoolSandbox(pool)
    env = repair(sandbox, max_turns=2, visible_tests=2)
    messages = env.reset(ADD)
    step = env.step(messages, WRONG)
    assert (step.done, step.passed, step.reward) == (False, False, None)
    assert step.metrics == {
        "visible_passed": 0.0,
        "visible_total": 2.0,
        "no_program": 0.0,
        "sandbox_error": 0.0,
    }
    (fb,) = step.feedback
    assert fb["role"] == "user"
    assert "visible test 1 of 2: wrong answer (WA)" in fb["content"]
    assert "Input:\n```\n1 2\n```" in fb["content"] and "Your output:\n```\n2\n```" in fb["content"]
    ran, _ = sandbox.runs[0]
    assert ran.tests == ADD.tests[:2]  # the hidden test never runs here
    messages += [{"role": "assistant", "content": WRONG}, *step.feedback]
    last = env.step(messages, WRONG)  # turn 2 of 2: done whatever the verdict
    assert (last.done, last.passed, last.feedback) == (True, False, [])


def test_a_turn_passing_the_visible_tests_ends_the_trajectory_even_if_a_hidden_test_fails(pool):
    env = repair(PoolSandbox(pool), max_turns=3, visible_tests=2)
    step = env.step(env.reset(ADD), HIDDEN_ONLY)
    assert (step.done, step.passed, step.feedback) == (True, True, [])
    assert step.metrics["visible_passed"] == 2.0
    # the executor judges the final turn on ALL tests: that one fails the hidden test
    assert pool.judge(ADD, HIDDEN_ONLY[10:-4]).verdict == "WA"


def test_public_tests_are_the_visible_ones_when_the_problem_has_them(pool):
    sandbox = PoolSandbox(pool)
    problem = Problem(**{**ADD.__dict__, "public_tests": [ADD.tests[0]]})
    env = repair(sandbox, max_turns=2, visible_tests=2)  # would show 2 without public tests
    step = env.step(env.reset(problem), WRONG)
    assert "visible test 1 of 1" in step.feedback[0]["content"]
    assert "1 2" in step.feedback[0]["content"] and "2 2" not in step.feedback[0]["content"]
    assert sandbox.runs[0][0].tests == [ADD.tests[0]]


def test_visible_tests_never_show_every_test():
    assert visible_tests(ADD, 5) == ADD.tests[:2]  # N - 1 at most
    assert visible_tests(ADD, 1) == ADD.tests[:1]
    one = Problem("one", "stdin", "x", [{"input": "", "output": "1\n"}])
    assert visible_tests(one, 3) == []


def test_with_no_visible_test_the_trajectory_is_one_turn(pool):
    sandbox = PoolSandbox(pool)
    env = repair(sandbox, max_turns=4)
    one = Problem("one", "stdin", "Print 1.", [{"input": "", "output": "1\n"}])
    step = env.step(env.reset(one), WRONG)
    assert (step.done, step.passed, step.feedback, sandbox.runs) == (True, None, [], [])
    answer = Problem("ans", "answer", "2+2?", [{"input": "", "output": "4"}] * 3)
    step = env.step(env.reset(answer), "4")  # nothing the sandbox runs: one turn too
    assert (step.done, step.passed, sandbox.runs) == (True, None, [])


def test_an_answer_without_a_complete_program_asks_for_the_fence(pool):
    sandbox = PoolSandbox(pool)
    env = repair(sandbox, max_turns=2)
    messages = env.reset(ADD)
    step = env.step(messages, "```python\nprint(1)\n")  # the block is never closed
    assert (step.done, step.passed, step.metrics["no_program"]) == (False, False, 1.0)
    assert "No complete program" in step.feedback[0]["content"]
    assert "```python block" in step.feedback[0]["content"] and sandbox.runs == []
    messages += [{"role": "assistant", "content": "x"}, *step.feedback]
    assert env.step(messages, "").done  # the last turn, again with nothing to run


def test_the_extraction_follows_the_runs_reasoning(pool):
    sandbox = PoolSandbox(pool)
    prompt = lambda p: [{"role": "user", "content": p.prompt}]  # noqa: E731
    context = EnvContext(EnvironmentConfig(kind="repair"), sandbox, prompt, reasoning="think")
    env = build_environment(context)
    step = env.step(env.reset(ADD), "<think>" + WRONG + " hmm")  # the reasoning never ended
    assert step.metrics["no_program"] == 1.0 and "no </think>" in step.feedback[0]["content"]
    step = env.step(env.reset(ADD), "<think>" + WRONG + "</think>" + RIGHT)
    assert step.passed and sandbox.runs[-1][1].startswith("a, b")


class FaultySandbox:
    def run(self, problem, code):
        return sandbox_error(len(problem.tests), "executor gave no verdict within 1 s")


def test_a_judge_fault_ends_the_trajectory_without_feedback():
    env = repair(FaultySandbox(), max_turns=3)
    step = env.step(env.reset(ADD), WRONG)
    assert (step.done, step.passed, step.feedback) == (True, None, [])
    assert step.metrics["sandbox_error"] == 1.0


def test_turns_are_counted_from_the_conversation_after_a_few_shot_prompt(pool):
    shots = [
        {"role": "user", "content": "Print 1."},
        {"role": "assistant", "content": "```python\nprint(1)\n```"},
    ]
    prompt = lambda p: [*shots, {"role": "user", "content": p.prompt}]  # noqa: E731
    context = EnvContext(EnvironmentConfig(kind="repair", max_turns=2), PoolSandbox(pool), prompt)
    env = build_environment(context)
    step = env.step(env.reset(ADD), WRONG)
    assert not step.done  # turn 1 of 2, although the prompt holds an assistant message

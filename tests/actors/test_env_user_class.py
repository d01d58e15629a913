"""A user environment class named by `environment.kind = "module:Class"`: the fixture the launch
test drives (tests/support/user_envs.py) is found, built and behaves as its docstring says;
a path that names nothing usable is refused with the fix."""

from __future__ import annotations

import pytest
from user_envs import FEEDBACK, PROBE, TwoTurnEcho, TwoTurnEchoProbe, echo_reward

from microcoder.actors.environments.base import (
    EnvContext,
    EnvironmentSetupError,
    build_environment,
    environment_class,
)
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.data.problem import Problem
from microcoder.protocol import ProgramRun

PROBLEM = Problem("p", "stdin", "Say hi.", [{"input": "", "output": "hi\n"}])


class NoSandbox:
    def run(self, problem, code):
        raise AssertionError("TwoTurnEcho never runs a program")


def context(max_turns: int) -> EnvContext:
    config = EnvironmentConfig(kind="user_envs:TwoTurnEcho", max_turns=max_turns)
    return EnvContext(config, NoSandbox(), lambda p: [{"role": "user", "content": p.prompt}])


def test_the_fixture_asks_for_a_second_turn_and_rewards_the_last_itself():
    env = build_environment(context(max_turns=2))
    assert type(env) is TwoTurnEcho and environment_class("user_envs:TwoTurnEcho") is TwoTurnEcho
    messages = env.reset(PROBLEM)
    first = env.step(messages, "hello")
    assert (first.done, first.reward, first.feedback) == (
        False,
        None,
        [{"role": "user", "content": FEEDBACK}],
    )
    messages += [{"role": "assistant", "content": "hello"}, *first.feedback]
    last = env.step(messages, "hi!!")
    assert (last.done, last.reward, last.passed) == (True, 1.0, True)
    assert env.step(messages, "hi!").reward == 0.0 == echo_reward(" odd ")


def test_with_one_turn_allowed_the_first_is_the_last():
    env = build_environment(context(max_turns=1))
    step = env.step(env.reset(PROBLEM), "ab")
    assert (step.done, step.reward) == (True, 1.0)


class RecordingSandbox:
    def __init__(self):
        self.calls = []

    def run(self, problem, code):
        self.calls.append((problem, code))
        return ProgramRun("WA", 0, len(problem.tests), first_failed=0)


def test_the_probe_runs_its_program_on_the_first_test_and_names_the_verdict():
    problem = Problem("q", "stdin", "Add.", [{"input": "1 2", "output": "3"}] * 3)
    sandbox = RecordingSandbox()
    config = EnvironmentConfig(kind="user_envs:TwoTurnEchoProbe", max_turns=2)
    env = build_environment(EnvContext(config, sandbox, lambda p: []))
    assert type(env) is TwoTurnEchoProbe
    first = env.step(env.reset(problem), "x")
    assert first.feedback[0]["content"] == f"{FEEDBACK} (probe verdict: WA)"
    [(ran, code)] = sandbox.calls
    assert code == PROBE and ran.tests == problem.tests[:1]


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("user_envs_missing:TwoTurnEcho", "cannot import module 'user_envs_missing'"),
        ("user_envs:Nope", "user_envs.Nope is missing"),
        ("user_envs:echo_reward", "is not a subclass of"),
    ],
)
def test_a_path_naming_nothing_usable_is_refused(kind, says):
    with pytest.raises(EnvironmentSetupError, match=says):
        environment_class(kind)

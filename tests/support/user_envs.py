"""A user environment (`environment.kind = "user_envs:TwoTurnEcho"`) for the tests, written as a
user would write one against actors/environments/base.py. Importable as `user_envs` where
tests/support is on the path: tests/conftest.py puts it on the tests' sys.path; a launch's
actors need it on PYTHONPATH (e.g. `env={**os.environ, "PYTHONPATH": str(SUPPORT)}` for
tests/support/launch_testing `start_launch`), as a user's module would be.

TwoTurnEcho: every trajectory has two turns (fewer only when `environment.max_turns` is 1).
After turn 1 it appends FEEDBACK as a user message, never running anything; after the last
turn it ends with its own reward, `echo_reward(final response)`, so the executor's judge is not
asked (Response.env_reward).

TwoTurnEchoProbe: the same, but turn 1 also runs a fixed probe program (PROBE, one that echoes
its input) through the environment's sandbox (in a launch: the executor pool, over Ray) on the
problem's first test, and names the verdict in the feedback (`probe verdict: WA`), so a launch
test sees a user environment's sandbox call come back from the executors."""

from __future__ import annotations

from dataclasses import replace

from microcoder.actors.environments.base import Environment, Messages
from microcoder.data.problem import Problem
from microcoder.protocol import EnvStep

FEEDBACK = "TwoTurnEcho feedback: say it again, in other words."
"""The user message between the two turns (a launch test finds it in the second turn's prompt)."""


def echo_reward(response: str) -> float:
    """The trajectory's reward: 1.0 when the final response has an even number of characters
    once stripped, else 0.0 (a rule of its own, which a test can recompute from the dump)."""
    return 1.0 if len(response.strip()) % 2 == 0 else 0.0


PROBE = "import sys\nprint(sys.stdin.read())"
"""TwoTurnEchoProbe's program: echoes its input (WA on most problems; a verdict either way)."""


class TwoTurnEcho(Environment):
    """Two turns, a fixed feedback between them, the reward `echo_reward` of the last."""

    def reset(self, problem: Problem) -> Messages:
        self.problem = problem
        messages = self.context.prompt_messages(problem)
        self.earlier = sum(m["role"] == "assistant" for m in messages)
        return messages

    def step(self, messages: Messages, response: str) -> EnvStep:
        turn = sum(m["role"] == "assistant" for m in messages) - self.earlier + 1
        if turn < min(2, self.context.config.max_turns):
            return EnvStep(
                done=False,
                feedback=[{"role": "user", "content": self.feedback()}],
                metrics={"echo_turn": float(turn)},
            )
        reward = echo_reward(response)
        return EnvStep(
            done=True, reward=reward, passed=reward == 1.0, metrics={"echo_turn": float(turn)}
        )

    def feedback(self) -> str:
        return FEEDBACK


class TwoTurnEchoProbe(TwoTurnEcho):
    """TwoTurnEcho whose first feedback also names the verdict of PROBE on the first test."""

    def feedback(self) -> str:
        run = self.context.sandbox.run(replace(self.problem, tests=self.problem.tests[:1]), PROBE)
        return f"{FEEDBACK} (probe verdict: {run.verdict})"

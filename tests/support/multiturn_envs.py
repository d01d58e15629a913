"""A user environment for the multi-turn tests (`environment.kind = "multiturn_envs:AskAgain"`,
importable by every actor of a launch or an eval started with tests/support on PYTHONPATH): it
runs no program (no sandbox call), asks for a second turn after every first one with a fixed
feedback message, and ends at turn 2 with a reward of its own (1.0 or 0.25)."""

from __future__ import annotations

from microcoder.actors.environments.base import Environment
from microcoder.protocol import EnvStep

FEEDBACK = "ASK-AGAIN: your first answer is not accepted yet; write the program again."
"""The feedback of every first turn (tests look for it in the second turn's prompt)."""


class AskAgain(Environment):
    """Two turns per trajectory; the reward is 1.0 when the last answer holds `print`, else
    0.25 (a value no judge gives: a score that is the environment's shows)."""

    def reset(self, problem):
        self.turns = 0
        return self.context.prompt_messages(problem)

    def step(self, messages, response):
        self.turns += 1
        if self.turns == 1:
            return EnvStep(
                done=False,
                feedback=[{"role": "user", "content": FEEDBACK}],
                passed=False,
                metrics={"asked_again": 1.0},
            )
        return EnvStep(done=True, reward=1.0 if "print" in response else 0.25, passed=None)

"""A user environment drives a 2-step tiny launch (issue 48): environment.kind =
"user_envs:TwoTurnEchoProbe" (tests/support/user_envs.py: always two turns, a fixed feedback
naming the verdict of a probe program its turn 1 ran through the sandbox, in the executor pool
over Ray; its own reward), importable by every actor through PYTHONPATH. The run trains its steps
on two-turn trajectories; the rollout dump shows both turns with the feedback between them, and
every score is the environment's reward (Response.env_reward: the executor judged nothing)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from launch_testing.batch import batched_launch
from launch_testing.launched import QUICK, SMALL_BATCH, assert_finished, rollout_rows, tiny_args
from user_envs import FEEDBACK, echo_reward

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # the launch runs in the fixture

STEPS = 2
CAP = 16  # QUICK's generator.max_response_tokens: the cap of each turn
SUPPORT = Path(__file__).parents[1] / "support"
SETTINGS = [
    *QUICK,
    *SMALL_BATCH,
    f"max_steps={STEPS}",
    "environment.kind=user_envs:TwoTurnEchoProbe",
    "environment.max_turns=2",
    "monitor.rollouts_every=1",
    "eval.every=0",
]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path])}

finished_run = batched_launch(__file__, "user-env", tiny_args(SETTINGS), env=ENV)
"""The module's one launch, run beside the other batched modules' (launch_testing.batch)."""


def test_the_run_trains_its_two_steps_on_two_turn_trajectories(finished_run):
    assert_finished(*finished_run, steps=STEPS)
    _, run_dir = finished_run
    rows = rollout_rows(run_dir)
    assert rows
    # every trajectory has two turns and the feedback between them: more than one turn's
    # tokens (a turn ends at its EOS or at the cap; the feedback alone is ~25 tokens)
    assert all(r["response_tokens"] > len(FEEDBACK) // 8 for r in rows)
    assert any(r["response_tokens"] > CAP for r in rows)


def test_the_dump_shows_the_feedback_and_the_reward_is_the_environments(finished_run):
    """Every row shows both turns, turn 1's feedback is TwoTurnEcho's, and the reward is the
    environment's own rule on the final answer (`echo_reward`), not a judge's."""
    _, run_dir = finished_run
    rows = rollout_rows(run_dir)
    for r in rows:
        turns = r.get("turns") or []
        assert len(turns) == 2, f"a dump row without its two turns; keys: {sorted(r)}"
        feedback = turns[0].get("feedback") or ""
        assert FEEDBACK in feedback
        # the probe's run came back from an executor with a real verdict (SE: it did not)
        verdict = re.search(r"probe verdict: (\w+)", feedback)
        assert verdict and verdict.group(1) in {"AC", "WA", "RE", "TLE", "MLE", "OLE"}, feedback
        assert r["reward"] == echo_reward(turns[-1]["response"]), r

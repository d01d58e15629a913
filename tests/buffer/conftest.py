"""Shared factories for the buffer tests: real Group / GroupScores records of any size."""

from __future__ import annotations

import numpy as np
import pytest

from microcoder.protocol import Group, GroupScores, Response, Score


def build_group(
    group_id: int, problem_id: str, versions=(0,), tokens: int = 4, prompt_tokens: int = 3
) -> Group:
    """A group with one response per entry of `versions` (its policy_version)."""
    rng = np.random.default_rng(group_id)
    responses = [
        Response(
            response_ids=rng.integers(0, 50_000, tokens, dtype=np.int32),
            logprobs=-rng.random(tokens, dtype=np.float32),
            text="print(1)",
            temperature=1.2,
            policy_version=v,
            truncated=False,
            finish_reason="stop",
        )
        for v in versions
    ]
    prompt_ids = np.arange(prompt_tokens, dtype=np.int32)
    return Group(group_id, problem_id, "solve it", prompt_ids, responses, "g0")


def build_scores(group: Group, reward: float = 1.0) -> GroupScores:
    """One AC/WA score per response of `group`."""
    verdict = "AC" if reward == 1.0 else "WA"
    scores = [Score(reward, verdict, 1, 1) for _ in group.responses]
    return GroupScores(group.group_id, scores, "e0")


@pytest.fixture
def make_group():
    return build_group


@pytest.fixture
def make_scores():
    return build_scores

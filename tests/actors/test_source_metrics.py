"""Per-source step metrics (learner/verdict_stats.py `source_metrics`, fed by actors/convert.py
over every group rank 0 fetched): share of groups, mean reward, pass rate (fraction AC)."""

from __future__ import annotations

import numpy as np
import pytest

from microcoder.actors.convert import Intake, source_inputs
from microcoder.learner.verdict_stats import source_metrics
from microcoder.protocol import Group, GroupScores, LearnerBatch, Response, Score, ScoredGroup


def scored(gid: int, source: str, rewards: list[float]) -> ScoredGroup:
    responses = [
        Response(np.array([1, 2], np.int32), np.array([-0.1, -0.2], np.float32)) for _ in rewards
    ]
    group = Group(gid, f"p{gid}", "", np.zeros(1, np.int32), responses, "g", source)
    scores = [Score(r, "AC" if r == 1.0 else "WA") for r in rewards]
    return ScoredGroup(group, GroupScores(gid, scores))


def test_share_reward_and_pass_rate_per_source():
    got = source_metrics(
        [
            ("A", [1.0, 0.0], ["AC", "WA"]),
            ("A", [1.0, 1.0], ["AC", "AC"]),
            ("A", [0.5, 0.5], ["WA", "WA"]),  # partial credit is not a pass
            ("B", [0.0, 0.0], ["WA", "TLE"]),
        ]
    )["data"]
    assert got["A"] == {
        "share": 0.75,
        "groups": 3,
        "reward": pytest.approx(4 / 6),
        "pass_rate": 0.5,
    }
    assert got["B"] == {"share": 0.25, "groups": 1, "reward": 0.0, "pass_rate": 0.0}
    assert source_metrics([]) == {}


def test_one_source_and_an_unnamed_source_are_reported_too():
    assert source_metrics([("only", [1.0], ["AC"])])["data"]["only"]["share"] == 1.0
    assert list(source_metrics([("", [0.0], ["WA"])])["data"]) == ["unnamed"]


def test_the_step_counts_every_fetched_group_filtered_ones_included():
    """Filtered groups (all rewards equal) still say what was drawn: the share counts them."""
    intake = Intake()
    batch = LearnerBatch(
        [scored(1, "A", [1.0, 0.0]), scored(2, "A", [1.0, 1.0]), scored(3, "B", [0.0, 1.0])],
        version=0,
        staleness=[0, 0, 0],
        done=False,
    )
    dropped = intake.add(batch, dynamic_filtering=True)
    assert dropped == [2]
    data = source_metrics(source_inputs(intake.fetched()))["data"]
    assert data["A"]["groups"] == 2 and data["B"]["groups"] == 1
    assert data["A"]["pass_rate"] == 0.75 and data["B"]["reward"] == 0.5

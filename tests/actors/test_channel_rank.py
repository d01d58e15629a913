"""The weight channel's rank layout for tensor-parallel engines (actors/weights/publisher.py)."""

from __future__ import annotations

import pytest

from microcoder.actors.weights.publisher import WeightPublisher, channel_rank


def test_each_tensor_parallel_worker_joins_with_its_own_rank_and_the_world_counts_them():
    spec = {"first_rank": 1, "world_size": None, "name": "gen-0"}
    assert [channel_rank(spec, w, 4) for w in range(4)] == [(1, 5), (2, 5), (3, 5), (4, 5)]
    assert channel_rank(spec, 0, 1) == (1, 2)  # one worker: the two-rank channel of before


def test_a_channel_opened_for_another_worker_count_is_refused_naming_both():
    spec = {"first_rank": 1, "world_size": 2, "name": "gen-0"}
    assert channel_rank(spec, 0, 1) == (1, 2)
    with pytest.raises(ValueError, match="opened for 2 ranks but this engine has 2 workers"):
        channel_rank(spec, 1, 2)


def test_a_worker_rank_outside_the_engine_is_refused():
    with pytest.raises(ValueError, match="outside 0..1"):
        channel_rank({"first_rank": 1, "world_size": None}, 2, 2)


def test_the_publisher_leaves_the_channel_size_to_the_engine_unless_told():
    pub = WeightPublisher(timeout_s=1)
    assert pub.open_channel("gen-a")["world_size"] is None
    assert pub.open_channel("gen-b", receivers=2)["world_size"] == 3
    assert pub.open_channel("gen-b", receivers=2)["first_rank"] == 1

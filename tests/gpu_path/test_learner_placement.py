"""Learner ranks are packed on as few nodes as possible: one STRICT_PACK placement group for all
ranks when they fit one node, else one per node (issue 31, item 5)."""

from __future__ import annotations

import pytest

from microcoder.launch.run.learner_placement import learner_rank_options, plan_learner_groups


def test_four_ranks_share_one_strict_pack_group():
    groups = plan_learner_groups(4, 1, 1, gpus_per_node=8)
    assert [(g.strategy, g.ranks) for g in groups] == [("STRICT_PACK", (0, 1, 2, 3))]
    assert groups[0].bundle == {"CPU": 1, "GPU": 1}


def test_four_ranks_share_one_group_when_the_node_size_is_unknown():
    groups = plan_learner_groups(4, 1, 1, gpus_per_node=None)
    assert [(g.strategy, g.ranks) for g in groups] == [("STRICT_PACK", (0, 1, 2, 3))]


def test_ranks_over_one_node_get_one_strict_pack_group_per_node_of_consecutive_ranks():
    groups = plan_learner_groups(20, 1, 1, gpus_per_node=8)
    assert [g.ranks for g in groups] == [tuple(range(0, 8)), tuple(range(8, 16)), (16, 17, 18, 19)]
    assert {g.strategy for g in groups} == {"STRICT_PACK"}
    assert len({g.name for g in groups}) == 3


def test_two_gpu_ranks_fill_a_node_by_gpus_not_by_count():
    groups = plan_learner_groups(8, 1, 2, gpus_per_node=8)
    assert [len(g.ranks) for g in groups] == [4, 4]


def test_custom_resources_ride_in_every_bundle():
    (group,) = plan_learner_groups(2, 1, 1, {"learner_node": 1.0}, gpus_per_node=8)
    assert group.bundle == {"CPU": 1, "GPU": 1, "learner_node": 1.0}


def test_cpu_ranks_get_no_group_and_keep_their_custom_resources():
    options, names = learner_rank_options(2, 1, 0, "cpu", {"learner_node": 1.0})
    assert names == []
    assert options == [{"resources": {"learner_node": 1.0}}] * 2


@pytest.mark.slow
def test_a_group_of_several_bundles_is_made_with_its_strategy(ray_cluster, monkeypatch):
    import ray

    from microcoder.launch.run.placement import GROUPS, release

    monkeypatch.setattr(GROUPS, "ready_timeout_s", 30.0)
    pg = GROUPS.create("gpu-path-pack", [{"CPU": 0.25}] * 2, "STRICT_PACK")
    try:
        table = ray.util.placement_group_table(pg)
        assert table["strategy"] == "STRICT_PACK"
        assert len(table["bundles"]) == 2
    finally:
        assert release("gpu-path-pack") == ["gpu-path-pack"]

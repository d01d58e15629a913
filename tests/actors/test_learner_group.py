"""The learner group on Ray with two FSDP2 ranks (gloo): rank 0 pulls the batch from the real
buffer, both ranks train on it, rank 0 publishes the new version to the buffer."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow


def put_scored_groups(address: str, n: int, group_size: int) -> None:
    """Act as generator and executor: n groups with differing rewards."""
    from microcoder.buffer.client import BufferClient
    from microcoder.buffer.groups import Group, GroupScores, Response, Score

    rng = np.random.default_rng(0)
    with BufferClient(address, owner="test-pipeline") as c:
        for a in c.get_prompts(n, wait_s=5).assignments:
            responses = [
                Response(
                    response_ids=rng.integers(5, 300, 12).astype(np.int32),
                    logprobs=np.full(12, -2.0, np.float32),
                    text="x",
                )
                for _ in range(group_size)
            ]
            c.put_unscored(
                Group(
                    group_id=a.group_id,
                    problem_id=a.problem_id,
                    prompt=a.prompt,
                    prompt_ids=np.arange(1, 9, dtype=np.int32),
                    responses=responses,
                )
            )
        for g in c.get_unscored(n, wait_s=5):
            scores = [
                Score(reward=float(i % 2), verdict="AC" if i % 2 else "WA")
                for i in range(group_size)
            ]
            c.put_scored(GroupScores(group_id=g.group_id, scores=scores))


def test_two_rank_learner_group_steps_and_announces_the_version(
    ray_cluster, actor_cfg, actor_prompts
):
    from microcoder.actors.learner_group import LearnerGroup
    from microcoder.actors.remote import buffer_host_cls
    from microcoder.buffer.client import BufferClient

    ray = ray_cluster
    cfg = actor_cfg.model_copy(deep=True)
    cfg.learner.world_size = 2
    host = buffer_host_cls().remote(cfg, actor_prompts)
    address = ray.get(host.get_address.remote())
    group = LearnerGroup(cfg, cfg.model.path, address)
    try:
        assert len(group.ranks) == 2 and group.version == 0
        put_scored_groups(address, cfg.learner.batch_size, cfg.algorithm.group_size)
        m = group.step(timeout_s=120)
        assert m["version"] == 1.0 and group.version == 1
        assert m["groups"] == cfg.learner.batch_size and m["loss"] == m["loss"]  # not NaN
        with BufferClient(address, owner="peek") as c:
            assert c.stats()["version"] == 1
        assert ray.get(group.rank0.latest_version.remote()) == 1
    finally:
        group.shutdown()
        ray.get(host.shutdown.remote())

"""Executor actor on real Ray with the real sandboxed judge and the real buffer."""

from __future__ import annotations

import numpy as np
import pytest
from buffer_testing import start_buffer_host

pytestmark = pytest.mark.slow

HOSTILE = "import os\nwhile True:\n    os.fork()\n"


@pytest.fixture(scope="module")
def exec_setup(ray_cluster, actor_cfg, actor_prompts, actor_problems):
    from microcoder.actors.remote import executor_cls

    ray = ray_cluster
    host, address = start_buffer_host(ray, actor_cfg, actor_prompts)
    ex = executor_cls(actor_cfg.executor).remote(
        "exec-0",
        actor_cfg.executor,
        actor_cfg.buffer,
        address,
        str(actor_problems.store_path),
    )
    ray.get(ex.ready.remote())
    yield ray, ex, address
    ray.get(ex.shutdown.remote())
    ray.get(host.shutdown.remote())


def put_group(address: str, actor_cfg, texts: list[str]) -> int:
    """Act as a generator: lease one prompt and hand in a group with the given response texts."""
    from microcoder.buffer.client import BufferClient
    from microcoder.protocol import Group, Response

    with BufferClient(address, owner="test-gen") as c:
        a = c.get_prompts(1, wait_s=5).assignments[0]
        responses = [
            Response(
                response_ids=np.array([1, 2], np.int32),
                logprobs=np.array([-1, -1], np.float32),
                text=t,
            )
            for t in texts
        ]
        c.put_unscored(
            Group(
                group_id=a.group_id,
                problem_id=a.problem_id,
                prompt=a.prompt,
                prompt_ids=np.array([5], np.int32),
                responses=responses,
                source=a.source,  # as a generator does (the buffer checks it)
            )
        )
    return a.problem_id


def solution_of(actor_cfg, problem_id: str) -> str:
    from microcoder.data.sources import load_run_problems

    problems = {p.id: p for p in load_run_problems(actor_cfg.data, actor_cfg.seed)}
    return problems[problem_id].meta["solution"]


def take_batch(address: str):
    from microcoder.buffer.client import BufferClient

    with BufferClient(address, owner="test-learner") as c:
        return c.get_batch(1, version=0, timeout_s=60).groups[0]


def test_correct_wrong_hostile_and_empty_responses_get_the_right_rewards(exec_setup, actor_cfg):
    ray, ex, address = exec_setup
    from microcoder.buffer.client import BufferClient

    with BufferClient(address, owner="peek") as c:
        pid = c.get_prompts(1, wait_s=5).assignments[0].problem_id
        c.release()
    pid = put_group(
        address,
        actor_cfg,
        [
            f"Here it is:\n```python\n{solution_of(actor_cfg, pid)}\n```",
            "```python\nprint(0)\n```",
            f"```python\n{HOSTILE}```",
            "",
        ],
    )
    ray.get(ex.run.remote(max_groups=1))
    sg = take_batch(address)
    assert sg.group.problem_id == pid
    assert sg.rewards.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert sg.verdicts[0] == "AC" and sg.verdicts[1] == "WA" and sg.verdicts[3] == "WA"
    assert sg.verdicts[2] not in ("AC", "SE")


def test_executor_keeps_judging_after_a_hostile_program(exec_setup, actor_cfg):
    ray, ex, address = exec_setup
    from microcoder.buffer.client import BufferClient

    with BufferClient(address, owner="peek2") as c:
        pid = c.get_prompts(1, wait_s=5).assignments[0].problem_id
        c.release()
    put_group(
        address,
        actor_cfg,
        [f"```python\n{HOSTILE}```", f"```python\n{solution_of(actor_cfg, pid)}\n```"],
    )
    ray.get(ex.run.remote(max_groups=1))
    assert take_batch(address).rewards.tolist() == [0.0, 1.0]
    stats = ray.get(ex.stats.remote())
    assert stats["groups"] == 2 and stats["failed_groups"] == 0


def test_workers_0_follows_the_cpus_ray_granted_the_executor(ray_cluster, actor_cfg):
    """Not the host's cores (2 here, 6 CPUs in the test cluster): a 1-CPU executor runs 1 sandbox
    worker."""
    from microcoder.actors.remote import executor_cls

    cfg = actor_cfg.executor.model_copy(update={"workers": 0, "cpus_per_executor": 1.0})
    ex = executor_cls(cfg).remote("exec-cpus", cfg)
    try:
        assert ray_cluster.get(ex.ready.remote(), timeout=120)["workers"] == 1
    finally:
        ray_cluster.get(ex.shutdown.remote(), timeout=60)
        ray_cluster.kill(ex)

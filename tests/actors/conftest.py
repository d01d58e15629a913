"""A small real cluster for the actor tests: local Ray, the buffer host, one vLLM generator.

Module-scoped where possible: a vLLM engine takes 15-40 s to start on these machines.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    import ray

    ray.init(num_cpus=6, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def actor_cfg(tiny_model_dir, tmp_path_factory):
    from microcoder.launch.config import load_config

    return load_config(
        None,
        [
            f'model.path="{tiny_model_dir}"',
            "cluster.device=cpu",
            "generator.max_response_tokens=24",
            "generator.max_prompt_tokens=160",
            "generator.max_inflight_prompts=4",
            "generator.kv_cache_gib=1",
            "algorithm.group_size=4",
            "learner.batch_size=2",
            "learner.lr=1e-3",
            "buffer.max_staleness=1",
            "executor.workers=1",
        ],
    )

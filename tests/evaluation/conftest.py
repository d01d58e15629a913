"""A small real cluster for the evaluation tests: local Ray, one tiny-model vLLM generator and one
executor (no buffer), shared by a module; CLI runs in the same process join that Ray."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_local(ray_cluster):
    """The session's Ray (tests/conftest.py)."""
    return ray_cluster


@pytest.fixture(scope="session")
def eval_cfg(tiny_model_dir):
    from microcoder.launch.config import load_config

    return load_config(
        None,
        [
            f'model.path="{tiny_model_dir}"',
            "cluster.device=cpu",
            "generator.max_response_tokens=64",
            "generator.max_prompt_tokens=512",
            "generator.kv_cache_gib=1",
            "generator.enforce_eager=true",  # no torch.compile: the engine starts ~2x sooner
            "executor.workers=1",
        ],
    )


@pytest.fixture(scope="module")
def executor(ray_local, eval_cfg):
    from microcoder.actors.remote import executor_cls

    handle = executor_cls(eval_cfg.executor).remote("executor-0", eval_cfg.executor)
    ray_local.get(handle.ready.remote(), timeout=120)
    yield handle
    ray_local.get(handle.shutdown.remote(), timeout=60)
    ray_local.kill(handle)


@pytest.fixture(scope="module")
def generator(ray_local, eval_cfg, tiny_model_dir):
    from microcoder.actors.remote import generator_cls
    from microcoder.launch.run.actor_settings import generator_settings

    handle = generator_cls(eval_cfg.generator).remote(
        "generator-0", generator_settings(eval_cfg), str(tiny_model_dir), None
    )
    ray_local.get(handle.ready.remote(), timeout=600)
    yield handle
    ray_local.get(handle.shutdown.remote(), timeout=60)
    ray_local.kill(handle)


@pytest.fixture(scope="module")
def renderer(eval_cfg, tiny_model_dir):
    from transformers import AutoTokenizer

    from microcoder.data.prompting.render import PromptRenderer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    return PromptRenderer(tok, eval_cfg.prompt, eval_cfg.model.chat_template_kwargs)

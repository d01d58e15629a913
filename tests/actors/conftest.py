"""A small real cluster for the actor tests: local Ray, the buffer host, one vLLM generator.

Module-scoped where possible: a vLLM engine takes 15-40 s to start on these machines.
"""

from __future__ import annotations

import pytest


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
            "generator.enforce_eager=true",  # no torch.compile: the engine starts ~2x sooner
            "algorithm.group_size=4",
            "learner.batch_size=2",
            "learner.lr=1e-3",
            "buffer.max_staleness=1",
            "executor.workers=1",
        ],
    )


@pytest.fixture(scope="session")
def actor_problems(actor_cfg, tmp_path_factory):
    """The run's problems for `actor_cfg` (launch/run/problems.py RunProblems: the problem store
    the executors open and its measured prompts)."""
    from transformers import AutoTokenizer

    from microcoder.launch.run.problems import prepare_run_problems

    tokenizer = AutoTokenizer.from_pretrained(actor_cfg.model.path)
    run_dir = tmp_path_factory.mktemp("actor-run")
    return prepare_run_problems(actor_cfg, tokenizer, run_dir, log=lambda _msg: None)


@pytest.fixture(scope="session")
def actor_prompts(actor_problems):
    """The (problem_id, prompt text) pairs a buffer host serves for `actor_cfg`."""
    return actor_problems.prompts()


@pytest.fixture(scope="session")
def render_statement(actor_cfg):
    """Statement -> the prompt text a generator receives (the stdin kind, as in training)."""
    from transformers import AutoTokenizer

    from microcoder.data.problem import Problem
    from microcoder.data.prompting.render import PromptRenderer

    renderer = PromptRenderer(
        AutoTokenizer.from_pretrained(actor_cfg.model.path),
        actor_cfg.prompt,
        actor_cfg.model.chat_template_kwargs,
    )

    def render(statement: str) -> str:
        return renderer.text(Problem("p", "stdin", statement, [{"input": "", "output": ""}]))

    render.renderer = renderer
    return render

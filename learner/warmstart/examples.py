"""Supervised (prompt → solution) examples, tokenized exactly as the RL generator sees them.

The prompt is `PromptRenderer.ids(problem)` (data/prompting/render.py: the chat template of the run's
[system, user] messages with the assistant turn opened), the rendering the generator uses; the
response is the canonical solution in a ```python fence, tokenized on its own (generation
continues after the prompt ids, it never re-tokenizes the joint text), followed by the eos token
(<|im_end|>). Loss falls on the response tokens only.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from microcoder.data.problem import Problem
from microcoder.data.prompting.render import PromptRenderer

IGNORE = -100
"""Label of positions that carry no loss (prompt and padding)."""


def response_text(solution: str) -> str:
    """The reply the policy should learn to give: one fenced python block."""
    return f"```python\n{solution.strip()}\n```"


@dataclass(frozen=True)
class SFTExample:
    """One tokenized training pair."""

    prompt_ids: tuple[int, ...]
    """Chat-template ids of [system, user] with the assistant turn opened."""
    response_ids: tuple[int, ...]
    """Ids of the fenced solution, ending with the eos token."""

    @property
    def input_ids(self) -> list[int]:
        return [*self.prompt_ids, *self.response_ids]


def encode_example(renderer: PromptRenderer, problem: Problem) -> SFTExample:
    """Tokenize one problem with its canonical solution (`problem.meta["solution"]`)."""
    solution = problem.meta.get("solution")
    if not solution:
        raise ValueError(
            f"problem {problem.id} has no meta['solution']; SFT needs a canonical solution "
            "(use microcoder.data.synthetic.tasks.generate_tasks)"
        )
    prompt = renderer.ids(problem)
    reply = renderer.encode_text(response_text(solution))
    return SFTExample(tuple(prompt), (*reply, renderer.tokenizer.eos_token_id))


def collate(examples: Sequence[SFTExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`, `attention_mask` and `labels` (IGNORE outside the response).

    `labels[i, t]` is the target at position t itself (unshifted, transformers' convention);
    the loss compares logits at t − 1 with it.
    """
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for row, ex in enumerate(examples):
        n = len(ex.input_ids)
        p = len(ex.prompt_ids)
        ids[row, :n] = torch.tensor(ex.input_ids)
        mask[row, :n] = 1
        labels[row, p:n] = torch.tensor(ex.response_ids)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def batch_indices(seed: int, step: int, n: int, batch_size: int) -> list[int]:
    """Example indices of (1-based) optimizer step `step`: epochs of seeded shuffles of range(n).

    A pure function of (seed, step), so a run resumed or rolled back to any step sees the same
    batches from there on.
    """
    if n < 1:
        raise ValueError("no training examples")
    start = (step - 1) * batch_size
    out = []
    for pos in range(start, start + batch_size):
        epoch, offset = divmod(pos, n)
        order = _epoch_order(seed, epoch, n)
        out.append(order[offset])
    return out


_ORDER_CACHE: dict[tuple[int, int, int], list[int]] = {}


def _epoch_order(seed: int, epoch: int, n: int) -> list[int]:
    key = (seed, epoch, n)
    if key not in _ORDER_CACHE:
        if len(_ORDER_CACHE) > 8:
            _ORDER_CACHE.clear()
        order = list(range(n))
        random.Random(f"sft-order:{seed}:{epoch}").shuffle(order)
        _ORDER_CACHE[key] = order
    return _ORDER_CACHE[key]

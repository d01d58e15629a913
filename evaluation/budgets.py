"""Several test budgets (max new tokens) from one generation.

Each sample is generated once, at the largest budget M. For a smaller budget B, a response of
more than B tokens is cut to its first B tokens (those ids decoded) and flagged as stopped by
length; a response of at most B tokens is unchanged. Autoregressive sampling draws token t from
a distribution that depends only on the tokens before it, so the first B tokens of a sample
drawn with max_tokens = M are distributed exactly like a sample drawn with max_tokens = B: the
figures at B are those of a separate run at B, for the cost of one run at M (and samples that
were not cut need no second judgement).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def check_budgets(budgets: Sequence[int]) -> list[int]:
    """Sorted distinct budgets; ValueError (how to fix) when empty or not positive."""
    out = sorted({int(b) for b in budgets})
    if not out or out[0] < 1:
        raise ValueError(
            f"--max-tokens {','.join(map(str, budgets))}: give one or more positive budgets"
        )
    return out


def budget_views(
    token_ids: Sequence[int],
    text: str,
    finish_reason: str | None,
    budgets: Sequence[int],
    decode: Callable[[Sequence[int]], str],
) -> list[dict[str, Any]]:
    """The response as it reads at each budget (ascending): {"max_tokens", "text", "tokens",
    "finish_reason", "cut"}. `text` and `finish_reason` are the engine's, at the largest budget;
    `decode` turns a prefix of `token_ids` into text (the engine's detokenizer settings)."""
    n = len(token_ids)
    views = []
    for b in check_budgets(budgets):
        if n > b:
            views.append(
                {
                    "max_tokens": b,
                    "text": decode(list(token_ids[:b])),
                    "tokens": b,
                    "finish_reason": "length",
                    "cut": True,
                }
            )
        else:
            views.append(
                {
                    "max_tokens": b,
                    "text": text,
                    "tokens": n,
                    "finish_reason": finish_reason,
                    "cut": False,
                }
            )
    return views

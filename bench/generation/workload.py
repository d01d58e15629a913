"""The workload of `microcoder bench generation --workload longtail|uniform`: seeded prompts, a
response length per group, and an in-memory buffer client that serves them.

Lengths: `longtail` draws each group's length from a seeded lognormal (median `max_tokens / 8`,
sigma 1) capped at `max_tokens` (the issue: code RL response lengths are long-tailed and the
longest hit the cap); `uniform` gives every group the same length, the longtail mean, so both
workloads carry about the same work. Each group samples exactly its length (per-request
`max_tokens` + `ignore_eos`), so streaming and waves do the same tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from microcoder.protocol import PromptAssignment, Prompts

WORKLOADS = ("longtail", "uniform")
_MIN_TOKENS = 4


def response_lengths(workload: str, groups: int, max_tokens: int, seed: int = 0) -> list[int]:
    """One response length per group, in [4, max_tokens]."""
    if workload not in WORKLOADS:
        raise ValueError(f"workload must be one of {WORKLOADS}, got {workload!r}")
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(mean=np.log(max_tokens / 8), sigma=1.0, size=groups)
    tail = np.clip(np.round(raw), _MIN_TOKENS, max_tokens).astype(int)
    if workload == "uniform":
        return [int(round(tail.mean()))] * groups
    return [int(x) for x in tail]


def prompt_token_ids(groups: int, prompt_tokens: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """Seeded random prompts of `prompt_tokens` ids each (distinct, so no prefix sharing between
    groups beyond chance)."""
    rng = np.random.default_rng(seed + 1)
    return [rng.integers(10, vocab, prompt_tokens).tolist() for _ in range(groups)]


@dataclass
class MemoryClient:
    """A BufferClient stand-in for one generator: serves `n` prompts in order ("w<i>", group id
    i), records each put group and when it was put. No admission control (the bench measures
    the engine side)."""

    n: int
    puts: list = field(default_factory=list)
    """(monotonic time, Group) per group put, in put order."""
    _next: int = 0

    def get_prompts(self, n: int, wait_s: float = 0.0):
        got = [
            PromptAssignment(group_id=i, problem_id=f"w{i}", prompt=f"w{i}")
            for i in range(self._next, min(self.n, self._next + n))
        ]
        self._next += len(got)
        return Prompts(assignments=got, done=self._next >= self.n and not got)

    def put_unscored(self, groups) -> None:
        now = time.monotonic()
        self.puts += [(now, g) for g in (groups if isinstance(groups, list) else [groups])]

    def tokens(self) -> int:
        return sum(g.n_tokens for _, g in self.puts)

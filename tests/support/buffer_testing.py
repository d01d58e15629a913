"""Test helpers for tests that feed a real buffer (tests/actors): `start_buffer_host` starts the
product's buffer actor, `put_scored_groups` acts as generator and executor; `ScriptedBuffer` stands in for rank 0's BufferClient. Importable as `buffer_testing` because tests/conftest.py puts
tests/support on sys.path."""

from __future__ import annotations

import numpy as np


def start_buffer_host(ray, cfg, prompts) -> tuple:
    """The product's buffer actor (actors/remote.py `buffer_host_cls`) for root config `cfg`,
    serving `prompts` ((problem_id, prompt text) pairs); returns (its handle, its address)."""
    from microcoder.actors.remote import buffer_host_cls

    host = buffer_host_cls().remote(cfg.buffer, cfg.data, cfg.learner.batch_size, prompts)
    return host, ray.get(host.get_address.remote())


def put_scored_groups(address: str, n: int, group_size: int, seed: int = 0) -> dict:
    """Act as generator and executor: n groups with differing rewards, response lengths and
    log-probs; returns {group_id: Group} as put."""
    from microcoder.buffer.client import BufferClient
    from microcoder.protocol import Group, GroupScores, Response, Score

    rng = np.random.default_rng(seed)
    put = {}
    with BufferClient(address, owner="test-pipeline") as c:
        for a in c.get_prompts(n, wait_s=5).assignments:
            lengths = rng.integers(4, 20, group_size)
            responses = [
                Response(
                    response_ids=rng.integers(5, 300, k).astype(np.int32),
                    logprobs=-rng.random(k).astype(np.float32),
                    text="x",
                )
                for k in lengths
            ]
            put[a.group_id] = Group(
                group_id=a.group_id,
                problem_id=a.problem_id,
                prompt=a.prompt,
                prompt_ids=rng.integers(1, 300, 8).astype(np.int32),
                responses=responses,
                source=a.source,  # as a generator does (the buffer checks it)
            )
            c.put_unscored(put[a.group_id])
        for g in c.get_unscored(n, wait_s=5):
            scores = [
                Score(reward=float(i % 2), verdict="AC" if i % 2 else "WA")
                for i in range(group_size)
            ]
            c.put_scored(GroupScores(group_id=g.group_id, scores=scores))
    return put


class ScriptedBuffer:
    """Stand-in BufferClient for rank 0's fetch: hands out the batches given, in order, and
    records the groups reported filtered and whether each fetch asked for the texts."""

    def __init__(self, batches: list):
        self.batches, self.filtered, self.texts = list(batches), [], []

    def get_batch(self, n, version, timeout_s=None, text=False):
        self.texts.append(text)
        return self.batches.pop(0)

    def report_filtered(self, group_ids):
        self.filtered += list(group_ids)

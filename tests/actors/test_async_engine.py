"""The async engine (actors/engines/async_llm.py) on the tiny model: `generator.engine_args` reach it,
its blocking generate equals transformers' greedy, an in-flight pause labels tokens with both
versions, and its EngineCore dies with the process that built it, kill -9 included (Linux)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from uuid import uuid4

import pytest
from engine_testing.greedy import hf_greedy
from engine_testing.tiny_engine import engine_fixture

pytestmark = pytest.mark.slow

PROMPTS = [[5, 6, 7, 8], [9, 10, 11], [300, 301, 302, 303, 304]]


engine = engine_fixture(
    max_prompt_tokens=64,
    max_response_tokens=256,
    engine_args={"max_num_seqs": 8},  # reaches the engine (checked below)
)


def start_streaming(engine, prompt: list[int], params):
    """Submit one request streamed CUMULATIVE; (future of its final completions by index, an
    event set once every sample has a token, i.e. sampling under the current label began)."""
    from vllm.sampling_params import RequestOutputKind

    params = params.clone()
    params.output_kind = RequestOutputKind.CUMULATIVE
    started, latest = threading.Event(), {}

    async def run():
        request = engine.salted({"prompt_token_ids": prompt})
        async for out in engine.llm.generate(request, params, uuid4().hex):
            latest.update({c.index: c for c in out.outputs})
            if len(latest) == params.n and all(c.token_ids for c in latest.values()):
                started.set()
        return [latest[i] for i in sorted(latest)]

    return engine.submit(run()), started


def test_the_blocking_generate_equals_transformers_greedy_in_prompt_order(engine, tiny_model_dir):
    from vllm import SamplingParams

    outs = engine.generate(
        [{"prompt_token_ids": p} for p in PROMPTS], SamplingParams(temperature=0, max_tokens=12)
    )
    assert [list(o.outputs[0].token_ids) for o in outs] == hf_greedy(tiny_model_dir, PROMPTS, 12)


def test_generator_engine_args_reach_the_built_engine(engine):
    """`generator.engine_args` is passed to the engine: its scheduler takes max_num_seqs = 8
    (vLLM 0.32's own defaults are 256 or more, vllm/engine/arg_utils.py
    `default_max_num_seqs`); prefix caching stays on by default."""
    config = engine.llm.vllm_config
    assert config.scheduler_config.max_num_seqs == 8
    assert config.cache_config.enable_prefix_caching is True


def through_a_pause(engine, prompt, params, mode: str, version: int) -> list:
    """Stream `prompt`; once it runs, pause(`mode`), label `version`, reset the prefix cache (True:
    the pause freed every block) and resume. Returns the request's outputs; the label is 0 again."""
    future, started = start_streaming(engine, prompt, params)
    assert started.wait(120)
    engine.pause(mode)
    try:
        engine.set_version(version)
        assert engine.reset_prefix_cache() is True
    finally:
        engine.resume()
    outputs = future.result(timeout=300)
    engine.set_version(0)
    return outputs


def test_a_request_kept_through_a_pause_carries_the_old_and_the_new_version(engine):
    """pause("keep") -> label 1 -> reset_prefix_cache (True: the pause freed every block) ->
    resume: the request finishes, its first tokens labelled 0 and its last 1."""
    from vllm import SamplingParams

    params = SamplingParams(n=2, temperature=1.0, max_tokens=256, ignore_eos=True, logprobs=0)
    outputs = through_a_pause(engine, PROMPTS[0], params, "keep", version=1)
    assert len(outputs) == 2
    for c in outputs:
        assert len(c.token_ids) == len(c.logprobs) == 256
        spans = c.weight_versions
        assert spans[0].version == "0" and spans[-1].version == "1"
        assert spans[0].start == 0 and spans[-1].end == 256


def test_a_wait_pause_lets_the_request_in_flight_finish_on_the_old_version(engine):
    """pause("wait") (between_groups) returns once vLLM drained the requests in flight: a label
    set after it never reaches them."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=1.0, max_tokens=64, ignore_eos=True, logprobs=0)
    (c,) = through_a_pause(engine, PROMPTS[1], params, "wait", version=7)
    assert len(c.token_ids) == 64
    assert {s.version for s in c.weight_versions} == {"0"}


def _perturbed_copy(model_dir, out) -> str:
    """The tiny model with every weight nudged (greedy output changes), saved to `out`."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for t in model.parameters():
            t.add_(torch.randn(t.shape, generator=gen) * 0.3 * (t.std() + 1e-3))
    model.save_pretrained(out)
    return str(out)


def _reload(engine, path) -> dict:
    engine.collective_rpc("reload_weights", kwargs={"weights_path": str(path)})
    engine.collective_rpc("_mc_fix_tied_lm_head")
    return {"version": 1}


def _hf_logprobs(model_dir, prompt: list[int], tokens: list[int]) -> list[float]:
    """transformers' log-probs of `tokens` following `prompt` (one forward pass, float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
    logp = torch.log_softmax(logits.float(), -1)
    return logp.gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1).tolist()


def test_an_update_that_reuses_the_kept_kv_never_serves_a_new_request_old_weights_kv(
    engine, tiny_model_dir, tmp_path
):
    """inflight_kv = "reuse": a prompt whose blocks sit in the prefix cache (computed under the
    old weights) and a request on it kept through the update (it holds those blocks, so the
    cache cannot be reset). After the update the kept request finishes with both versions, and
    a new request on the same prompt hits no cached block (the salt changed) and its log-probs
    are transformers' on the NEW weights."""
    from vllm import SamplingParams

    from microcoder.actors.weights.publisher import update_engine

    rng = random.Random(3)
    prompt = [rng.randrange(5, 1000) for _ in range(200)]  # full KV blocks, kept by the cache
    greedy = SamplingParams(temperature=0, max_tokens=4, logprobs=0)
    request = [{"prompt_token_ids": prompt}]
    engine.generate(request, greedy)
    assert engine.generate(request, greedy)[0].num_cached_tokens > 0  # the cache holds it
    new_dir = _perturbed_copy(tiny_model_dir, tmp_path / "nudged")
    params = SamplingParams(n=2, temperature=1.0, max_tokens=100, ignore_eos=True, logprobs=0)
    future, started = start_streaming(engine, prompt, params)
    assert started.wait(120)
    try:
        result, _ = update_engine(engine, "keep", lambda: _reload(engine, new_dir), "t", "reuse")
        assert result["version"] == 1
        outputs = future.result(timeout=300)
        after = engine.generate(request, greedy)[0]
    finally:
        update_engine(engine, "wait", lambda: _reload(engine, tiny_model_dir), "t restore")
        engine.set_version(0)
    assert all(len(c.token_ids) == 100 for c in outputs)
    assert all({s.version for s in c.weight_versions} == {"0", "1"} for c in outputs)
    assert after.num_cached_tokens == 0
    tokens = list(after.outputs[0].token_ids)
    got = [lp[t].logprob for lp, t in zip(after.outputs[0].logprobs, tokens, strict=True)]
    want = _hf_logprobs(new_dir, prompt, tokens)
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 1e-3


CHILD = """
import sys, time
from microcoder.actors.engines.async_llm import build_async_engine
from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines.build import WORKER_EXTENSION

if __name__ == "__main__":
    cfg = GeneratorConfig(max_prompt_tokens=32, max_response_tokens=16, kv_cache_gib=1, enforce_eager=True)
    eng = build_async_engine(sys.argv[1], cfg, "cpu", worker_extension_cls=WORKER_EXTENSION)
    print("ENGINE_CORE_PID", eng.engine_core_pid, flush=True)
    time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """No such process, or a zombie (dead, waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.timeout(300)
def test_the_engine_core_dies_when_the_process_that_built_it_is_killed_9(tiny_model_dir, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(tiny_model_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    core = None
    try:
        for line in child.stdout:
            if line.startswith("ENGINE_CORE_PID"):
                core = int(line.split()[1])
                break
        assert core is not None and core != child.pid, f"no engine core pid (rc {child.poll()})"
        assert not _gone(core)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        deadline = time.monotonic() + 10
        while not _gone(core) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(core), f"EngineCore {core} outlived its killed parent {child.pid}"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        if core is not None and not _gone(core):
            os.kill(core, signal.SIGKILL)

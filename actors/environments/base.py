"""The environment interface, its context, and the one registry of environments.

    env = build_environment(context)      # one instance per trajectory
    messages = env.reset(problem)         # turn 1's chat messages
    step = env.step(messages, response)   # after each model turn: an EnvStep
    # not step.done: messages += [assistant turn] + step.feedback, and the model answers again

An instance lives for one trajectory (`reset` may keep the problem), so it needs no locking; the
generator runs `step` off its event loop (it may block on the sandbox). `step` must be done by
`EnvironmentConfig.max_turns`: the caller ends the trajectory there whatever `done` says. A
`step` that raises fails the trajectory's group (the generator reports it like an engine
error); it is never trained on.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.data.problem import Problem
from microcoder.protocol import EnvStep, ProgramRun

Messages = list[dict[str, str]]
"""Chat messages, `{"role": ..., "content": ...}`, as tokenizers' chat templates take them."""


class EnvSandbox(Protocol):
    """Runs a program in the executor pool (never in the generator's process)."""

    def run(self, problem: Problem, code: str | None) -> ProgramRun:
        """Judge `code` (None: no code was found, judged WA) on `problem.tests` (the caller
        passes a problem whose tests are the ones to run) and say how it went."""
        ...


@dataclass
class EnvContext:
    """What every environment is built with."""

    config: EnvironmentConfig
    """The `[environment]` section."""
    sandbox: EnvSandbox
    """Program runs, in the executor pool."""
    prompt_messages: Callable[[Problem], Messages]
    """The run's first-turn messages of a problem (data/prompting/render.py
    `PromptRenderer.messages`): what a single turn's prompt is rendered from."""
    reasoning: str = "none"
    """The run's resolved `prompt.reasoning` (none, think or marker:END; launch/run/cluster.py
    resolves `auto` from the chat template and hands it to the executors too): where
    sandbox/extract.py finds a turn's final answer, as the executor's judging does."""


class Environment(ABC):
    """One trajectory's environment. Subclass it for `environment.kind = "module:Class"`."""

    def __init__(self, context: EnvContext):
        self.context = context

    @abstractmethod
    def reset(self, problem: Problem) -> Messages:
        """The first turn's chat messages for `problem`."""

    @abstractmethod
    def step(self, messages: Messages, response: str) -> EnvStep:
        """Answer the model's turn: `messages` is the conversation so far (the last one the
        prompt the model answered), `response` its decoded answer."""


class SingleTurn(Environment):
    """`environment.kind = "single"`: one turn, judged by the executor on all tests (today's
    behaviour, the paper's)."""

    def reset(self, problem: Problem) -> Messages:
        return self.context.prompt_messages(problem)

    def step(self, messages: Messages, response: str) -> EnvStep:
        return EnvStep(done=True)


REGISTRY: dict[str, str] = {
    "single": "microcoder.actors.environments.base:SingleTurn",
    "repair": "microcoder.actors.environments.repair:Repair",
}
"""Every built-in environment, once (config.py BUILT_IN lists the same names)."""


class EnvironmentSetupError(ValueError):
    """`environment.kind` names nothing that can be built; the message says what to fix."""


def environment_class(kind: str) -> type[Environment]:
    """The class `kind` names: a built-in name or `module:Class` (imported here)."""
    path = REGISTRY.get(kind, kind)
    module_name, _, class_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise EnvironmentSetupError(
            f"environment.kind {kind!r}: cannot import module {module_name!r} ({err}); put it on "
            "PYTHONPATH (every actor's, the launcher's too) or fix the path"
        ) from err
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise EnvironmentSetupError(
            f"environment.kind {kind!r}: {module_name}.{class_name} is "
            f"{'missing' if cls is None else 'not a subclass of'} "
            "microcoder.actors.environments.base.Environment"
        )
    return cls


def build_environment(context: EnvContext) -> Environment:
    """A new environment for one trajectory, of the class `context.config.kind` names."""
    return environment_class(context.config.kind)(context)

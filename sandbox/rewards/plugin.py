"""Reward functions users plug in: `executor.reward = "module:function"`.

A reward function is called once per response, by the executor (actors/scoring.py), after the
judge:

    def my_reward(problem, response, verdict):
        return 0.5                                   # a float reward, or
        return 1.0, {"format": 1.0, "length": 0.2}   # (reward, {name: float}) components

- `problem`: the Problem record (data/problem.py) the response answers;
- `response`: the response text, whole (reasoning included);
- `verdict`: the sandbox's Verdict (sandbox/verdict.py) for a code kind (stdin, functional,
  assert; `unfinished` included: extraction found the response cut, no test ran), or None for
  a kind the sandbox does not judge (`answer`).

A response whose program hit a sandbox fault (SE) never reaches the function: its group fails.
A function that raises, or returns something else than the above (a NaN, a string), fails
its group as a system error: the executor counts it (`reward_errors`), logs it with the problem
id and goes on judging. Named components are averaged over the step's responses that report
them and logged beside the verdict counts (`reward_components` in metrics.jsonl).

The default, `DEFAULT_REWARD`, is the code judge as before (the verdict's reward: 1/0, or the
fraction of tests passed with `partial_credit`) and the exact-answer check for `answer`
problems (sandbox/rewards/answer.py). No torch import.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

DEFAULT_REWARD = "microcoder.sandbox.rewards.plugin:judge_or_answer"
"""`executor.reward`'s default."""
RewardFn = Callable[[Any, str, Any], Any]


class RewardError(ValueError):
    """A reward function returned something that is not a reward."""


def resolve_reward(path: str) -> RewardFn:
    """The callable `path` ("pkg.mod:func") names; ValueError saying how to fix it otherwise."""
    fix = "set it to 'pkg.mod:func', a function (problem, response, verdict) -> float"
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"executor.reward: {path!r} is not an import path; {fix}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ValueError(
            f"executor.reward: no module {module_name!r} ({e}); {fix}, with the module "
            "importable on every node (installed, or on PYTHONPATH)"
        ) from None
    fn: Any = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ValueError(f"executor.reward: module {module_name!r} has no {attr!r}; {fix}")
    if not callable(fn):
        raise ValueError(
            f"executor.reward: {path!r} is a {type(fn).__name__}, not a function; {fix}"
        )
    return fn


def check_reward(value: Any) -> tuple[float, dict[str, float]]:
    """A reward function's return value as (reward, components); RewardError if it is not one."""
    components: Any = {}
    if isinstance(value, tuple):
        if len(value) != 2:
            raise RewardError(f"returned a tuple of {len(value)}; return a float or (float, dict)")
        value, components = value
    reward = _number(value, "the reward")
    if not isinstance(components, dict):
        raise RewardError(
            f"components are a {type(components).__name__}; return a dict {{name: float}}"
        )
    out = {}
    for name, v in components.items():
        if not isinstance(name, str):
            raise RewardError(f"component name {name!r} is not a string")
        out[name] = _number(v, f"component {name!r}")
    return reward, out


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RewardError(f"{what} is a {type(value).__name__}, not a number")
    if not math.isfinite(value):
        raise RewardError(f"{what} is {value}, not a finite number")
    return float(value)


def score_reply(reward_fn: RewardFn, problem, response: str) -> tuple[float, dict[str, float], str]:
    """(reward, components, verdict) of a reply to a kind the sandbox does not run (`answer`):
    the reward function with verdict None, checked (`check_reward`); the verdict is AC for a
    reward >= 1, else WA. Training's Score (actors/scoring.py) and the held-out eval's record
    (`Executor.score_replies`) both come from here. Raises what the function raises, or
    RewardError."""
    reward, components = check_reward(reward_fn(problem, response, None))
    return reward, components, "AC" if reward >= 1.0 else "WA"


def judge_or_answer(problem, response: str, verdict) -> float | tuple[float, dict[str, float]]:
    """The default reward: the judge's reward for code kinds (1/0, or the fraction of tests
    passed with `partial_credit`); for `answer` problems the exact-answer check
    (sandbox/rewards/answer.py `exact_answer`)."""
    if verdict is not None:
        return float(verdict.reward or 0.0)
    if problem.kind == "answer":
        from microcoder.sandbox.rewards.answer import exact_answer

        return exact_answer(problem, response, verdict)
    raise RewardError(
        f"problem kind {problem.kind!r} has no judge and no built-in reward; set executor.reward "
        "to a function that scores it"
    )

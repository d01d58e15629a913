"""Judge groups of responses with a JudgePool: code extraction, verdicts -> per-response Scores.

Extraction follows the run's resolved `prompt.reasoning` (sandbox/extract.py). A response with
no code is submitted as code None (the judge scores it WA). A response cut inside its reasoning
or its final code block (or truncated before any closed block) is not submitted: its verdict
is `unfinished`, reward 0. A sandbox
fault (SE, already retried by the pool) is never the model's fault, so a group with an SE is
not scored at all: it is reported as failed (the buffer counts it) instead of training on it.

The reward of each response is the run's reward function (`executor.reward`,
sandbox/rewards/plugin.py) of (problem, response text, verdict). A kind the sandbox does not judge
(`answer`) is not submitted: the function gets verdict None, and the Score's verdict is AC for
a reward >= 1, else WA. A function that raises (or returns no number) fails its whole group,
counted in `reward_errors` and logged with the problem id.

A trajectory a user environment rewarded itself (`Response.env_reward`, actors/environments/:
its `step` returned done with a reward) is neither judged nor given to the reward function:
its Score is that reward, verdict AC for a reward >= 1 else WA (as for a kind with no verdict),
tests 1 passed of 1 for AC, 0 of 1 for WA, detail "env_reward". The built-in environments leave
env_reward None: their final turn's text is judged on all tests like a single turn's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from microcoder.data.problem import JUDGED_KINDS, Problem
from microcoder.protocol import Group, GroupScores, Score
from microcoder.sandbox import extract, unfinished_verdict
from microcoder.sandbox.rewards.plugin import check_reward, judge_or_answer, score_reply


@dataclass
class ScoringOutcome:
    scored: list[GroupScores] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    """(group_id, reason) for groups that could not be scored."""
    tests_run: int = 0
    reward_errors: int = 0
    """Groups failed because the reward function raised or returned no number."""


def score_groups(
    pool,
    problems: Mapping[str, Problem],
    groups: Sequence[Group],
    owner: str,
    reasoning: str = "none",
    reward_fn: Callable | None = None,
) -> ScoringOutcome:
    """Judge every response of `groups` on `pool`; one GroupScores per scorable group.
    `reasoning`: the resolved `prompt.reasoning` (none, think or marker:END). `reward_fn`: the
    resolved `executor.reward` (None: the default, sandbox/rewards/plugin.py `judge_or_answer`)."""

    reward_fn = reward_fn or judge_or_answer
    out = ScoringOutcome()
    verdicts: dict[int, list] = {}
    statuses: dict[int, list[str]] = {}
    for g in groups:
        problem = problems.get(g.problem_id)
        if problem is None:
            out.failed.append(
                (g.group_id, f"unknown problem id {g.problem_id!r} (executor data differs?)")
            )
            continue
        verdicts[g.group_id] = [None] * len(g.responses)
        statuses[g.group_id] = [""] * len(g.responses)
        if problem.kind not in JUDGED_KINDS:
            continue
        for i, r in enumerate(g.responses):
            if r.env_reward is not None:
                continue  # the environment's own reward (env_score), never judged
            found = extract(r.text, reasoning, r.truncated, problem.language)
            statuses[g.group_id][i] = found.status
            if found.status == "unfinished":
                verdicts[g.group_id][i] = unfinished_verdict(len(problem.tests), found.reason)
                continue
            pool.submit(problem, found.code, solution_id=f"{g.group_id}/{i}", tag=(g.group_id, i))
    for v in pool.as_completed():
        gid, i = v.tag
        verdicts[gid][i] = v
        out.tests_run += v.passed + (1 if v.first_failed is not None else 0)
    for g in groups:
        vs = verdicts.get(g.group_id)
        if vs is None:
            continue
        se = [v for v in vs if v is not None and v.verdict == "SE"]
        if se:
            out.failed.append((g.group_id, f"sandbox fault (SE) after retries: {se[0].message}"))
            continue
        problem = problems[g.problem_id]
        try:
            scores = [
                env_score(r.env_reward)
                if r.env_reward is not None
                else _score(reward_fn, problem, r.text, v, x)
                for r, v, x in zip(g.responses, vs, statuses[g.group_id], strict=True)
            ]
        except Exception as err:
            name = getattr(reward_fn, "__qualname__", repr(reward_fn))
            reason = f"reward function {name} raised {type(err).__name__}: {err}"[:500]
            print(f"group {g.group_id} (problem {problem.id}): {reason}", file=sys.stderr)
            out.failed.append((g.group_id, reason))
            out.reward_errors += 1
            continue
        out.scored.append(GroupScores(group_id=g.group_id, scores=scores, executor=owner))
    return out


def env_score(reward: float) -> Score:
    """The Score of a trajectory its environment rewarded: that reward, AC at >= 1 else WA."""
    verdict = "AC" if reward >= 1 else "WA"
    return Score(float(reward), verdict, int(verdict == "AC"), 1, "env_reward")


def _score(reward_fn: Callable, problem: Problem, text: str, v, extraction: str) -> Score:
    """One response's Score: the reward function's reward and components, the verdict's facts
    (AC / WA by the reward for a kind with no verdict)."""

    if v is None:
        reward, components, verdict = score_reply(reward_fn, problem, text)
        return Score(reward, verdict, int(verdict == "AC"), 1, "", extraction, components)
    reward, components = check_reward(reward_fn(problem, text, v))
    return Score(
        reward=reward,
        verdict=v.verdict,
        tests_passed=v.passed,
        tests_total=v.total,
        detail=v.message[:200],
        extraction=extraction,
        components=components,
    )

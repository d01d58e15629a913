"""Judge groups of responses with a JudgePool: code extraction, verdicts -> per-response Scores.

Extraction follows the run's resolved `prompt.reasoning` (sandbox/extract.py). A response with
no code is submitted as code None (the judge scores it WA). A response cut inside its reasoning
or its final code block (or truncated before any closed block) is not submitted: its verdict
is `unfinished`, reward 0. A sandbox
fault (SE, already retried by the pool) is never the model's fault, so a group with an SE is
not scored at all: it is reported as failed (the buffer counts it) instead of training on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from microcoder.data.problem import Problem
from microcoder.protocol import Group, GroupScores, Score


@dataclass
class ScoringOutcome:
    scored: list[GroupScores] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    """(group_id, reason) for groups that could not be scored."""
    tests_run: int = 0


def score_groups(
    pool,
    problems: Mapping[str, Problem],
    groups: Sequence[Group],
    owner: str,
    reasoning: str = "none",
) -> ScoringOutcome:
    """Judge every response of `groups` on `pool`; one GroupScores per scorable group.
    `reasoning`: the resolved `prompt.reasoning` (none, think or marker:END)."""
    from microcoder.sandbox import extract, unfinished_verdict

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
        for i, r in enumerate(g.responses):
            found = extract(r.text, reasoning, r.truncated)
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
        se = [v for v in vs if v.verdict == "SE"]
        if se:
            out.failed.append((g.group_id, f"sandbox fault (SE) after retries: {se[0].message}"))
            continue
        scores = [
            Score(
                reward=float(v.reward),
                verdict=v.verdict,
                tests_passed=v.passed,
                tests_total=v.total,
                detail=v.message[:200],
                extraction=x,
            )
            for v, x in zip(vs, statuses[g.group_id], strict=True)
        ]
        out.scored.append(GroupScores(group_id=g.group_id, scores=scores, executor=owner))
    return out

"""Held-out pass rate: sample one reply per problem, judge it in the sandbox, count passes.

    heldout_pass_rate(generate, problems, judge, reasoning="none") -> float
    heldout_eval(generate, problems, judge, reasoning="none") -> HeldoutResult   (with details)

Generation is abstracted (`generate(problems) -> list of reply texts`, one per problem, in
order) so the SFT loop can sample with transformers and the RL run with its vLLM engine (at
T = 1.0 for the sampled rate, T = 0 for the greedy one). Model output is untrusted: the code is
pulled out with the sandbox's `extract` (under `reasoning`, the resolved `prompt.reasoning`, as
in training) and judged ONLY by `judge`, which is expected to run it in the sandbox
(`microcoder.sandbox`). A reply with no code, or unfinished (cut inside its reasoning or its
final code block), counts as a failure without reaching the judge; a sandbox fault (reward
None, verdict SE) is not the model's fault and is left out of the rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from microcoder.data.problem import Problem
from microcoder.sandbox import extract

GenerateFn = Callable[[Sequence[Problem]], list[str]]
"""Sample one reply text per problem (same order)."""
JudgeFn = Callable[[Sequence[tuple[Problem, str]]], list[float | None]]
"""Reward per (problem, code) pair, judged in the sandbox; None = sandbox fault (not scored)."""


@dataclass(frozen=True)
class HeldoutResult:
    """One held-out evaluation."""

    pass_rate: float
    """Passed / scored (scored = problems minus sandbox faults)."""
    passed: int
    """Replies whose code passed every test."""
    scored: int
    """Problems that count (all minus sandbox faults)."""
    no_code: int
    """Replies with nothing to run (scored as failures without judging)."""
    unfinished: int
    """Replies cut inside their reasoning or final code block (failures, not judged)."""
    sandbox_faults: int
    """Judgements the sandbox could not complete (left out of the rate)."""
    generate_s: float
    """Seconds spent generating."""
    judge_s: float
    """Seconds spent judging."""
    replies: list[str] = field(default_factory=list, repr=False)
    """The sampled reply texts, in problem order (for logs)."""


def heldout_eval(
    generate: GenerateFn, problems: Sequence[Problem], judge: JudgeFn, reasoning: str = "none"
) -> HeldoutResult:
    """Sample, extract, judge; see the module docstring."""
    if not problems:
        raise ValueError("held-out evaluation needs at least one problem")
    t0 = time.perf_counter()
    replies = list(generate(problems))
    t1 = time.perf_counter()
    if len(replies) != len(problems):
        raise ValueError(f"generate returned {len(replies)} replies for {len(problems)} problems")
    found = [
        extract(r, reasoning, language=p.language) for r, p in zip(replies, problems, strict=True)
    ]
    codes = [f.code for f in found]
    to_judge = [(p, c) for p, c in zip(problems, codes, strict=True) if c is not None]
    rewards = list(judge(to_judge)) if to_judge else []
    t2 = time.perf_counter()
    if len(rewards) != len(to_judge):
        raise ValueError(f"judge returned {len(rewards)} rewards for {len(to_judge)} solutions")
    faults = sum(r is None for r in rewards)
    passed = sum(1 for r in rewards if r is not None and r >= 1.0)
    scored = len(problems) - faults
    if scored == 0:
        raise RuntimeError(
            f"the sandbox failed on all {len(problems)} held-out solutions (verdict SE); "
            "check that the judge works: `microcoder bench judge` or the sandbox tests"
        )
    return HeldoutResult(
        pass_rate=passed / scored,
        passed=passed,
        scored=scored,
        no_code=sum(f.status == "no_code" for f in found),
        unfinished=sum(f.status == "unfinished" for f in found),
        sandbox_faults=faults,
        generate_s=t1 - t0,
        judge_s=t2 - t1,
        replies=replies,
    )


def heldout_pass_rate(
    generate: GenerateFn, problems: Sequence[Problem], judge: JudgeFn, reasoning: str = "none"
) -> float:
    """Fraction of held-out problems whose sampled reply passes all tests (see heldout_eval)."""
    return heldout_eval(generate, problems, judge, reasoning).pass_rate

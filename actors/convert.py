"""Buffer messages -> learner records: a field copy, so neither side depends on the other.

The arrays the buffer's codec decoded are passed on by reference (no `.tolist()`): rank 0 packs
them into the learner's PackedBatch (learner/intake.py: `pack`).
"""

from __future__ import annotations

import numpy as np

from microcoder.learner.algorithm.grpo import is_non_incorrect
from microcoder.learner.intake import GroupArrays
from microcoder.learner.verdict_stats import NO_CODE
from microcoder.protocol import ScoredGroup


def to_group_arrays(sg: ScoredGroup) -> GroupArrays:
    """One scored group as the learner's GroupArrays; empty responses are dropped (nothing to
    train on; they still counted in the judge's verdicts)."""
    kept = [i for i, r in enumerate(sg.group.responses) if len(r.response_ids)]
    pairs = [(sg.group.responses[i], sg.result.scores[i]) for i in kept]
    return GroupArrays(
        group_id=int(sg.group.group_id),
        prompt_ids=sg.group.prompt_ids,
        response_ids=[r.response_ids for r, _ in pairs],
        logprobs=[r.logprobs for r, _ in pairs],
        rewards=np.array([s.reward for _, s in pairs], np.float64),
        temperatures=np.array([r.temperature for r, _ in pairs], np.float32),
        truncated=np.array([r.truncated for r, _ in pairs], np.bool_),
        non_incorrect=np.array([is_non_incorrect(s.verdict) for _, s in pairs], np.bool_),
        policy_versions=np.array([r.policy_version for r, _ in pairs], np.int64),
        last_policy_versions=np.array([_last_version(r) for r, _ in pairs], np.int64),
        response_index=np.array(kept, np.int64),
        generator=sg.group.generator,
    )


def _last_version(response) -> int:
    """The version of its last token, or of its first where the producer did not record it."""
    last = response.last_policy_version
    return response.policy_version if last is None else last


def verdict_label(score) -> str:
    """A Score's label in the step's verdict metrics: `no_code` when extraction found nothing to
    run (judged WA), else its verdict (learner/verdict_stats.py)."""
    return NO_CODE if score.extraction == NO_CODE else score.verdict


def verdict_inputs(groups: list[ScoredGroup]) -> list[tuple[list[str], list[int]]]:
    """(labels, response token counts) per group, every response of it (empty ones too): the
    input of learner/verdict_stats.py `step_verdict_metrics`."""
    return [
        (
            [verdict_label(s) for s in sg.result.scores],
            [len(r.response_ids) for r in sg.group.responses],
        )
        for sg in groups
    ]


def component_inputs(groups: list[ScoredGroup]) -> list[dict[str, float]]:
    """Every response's reward components (`Score.components`), the input of
    learner/verdict_stats.py `reward_component_means`."""
    return [s.components for sg in groups for s in sg.result.scores]

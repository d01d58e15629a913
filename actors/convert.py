"""Buffer messages -> learner records: a field copy, so neither side depends on the other, and
rank 0's intake of one batch (`Intake`: conversion, the non-finite guard, the dynamic filter).

The arrays the buffer's codec decoded are passed on by reference (no `.tolist()`): rank 0 packs
them into the learner's PackedBatch (learner/intake.py: `pack`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from microcoder.learner.algorithm.diversity import batch_diversity
from microcoder.learner.algorithm.grpo import is_non_incorrect
from microcoder.learner.intake import GroupArrays, IntakeStats, drop_nonfinite, signal_filter
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
        loss_masks=[r.loss_mask for r, _ in pairs]
        if any(r.loss_mask is not None for r, _ in pairs)
        else None,
    )


def model_tokens(g: GroupArrays) -> list[np.ndarray]:
    """Each response's model tokens (a multi-turn trajectory's without its feedback tokens, which
    the environment wrote and which would make every trajectory of a group look alike to the
    diversity's n-grams; n-grams then run across the turn boundary)."""
    if g.loss_masks is None:
        return list(g.response_ids)
    return [
        r if m is None else r[np.asarray(m) != 0]
        for r, m in zip(g.response_ids, g.loss_masks, strict=True)
    ]


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


def source_inputs(groups: list[ScoredGroup]) -> list[tuple[str, list[float], list[str]]]:
    """(source name, rewards, verdict labels) per group: the input of learner/verdict_stats.py
    `source_metrics`."""
    return [
        (
            sg.group.source,
            [s.reward for s in sg.result.scores],
            [s.verdict for s in sg.result.scores],
        )
        for sg in groups
    ]


def trajectory_inputs(groups: list[ScoredGroup]) -> list[tuple[list[bool | None], int]]:
    """(each turn's `passed`, feedback tokens) per response of `groups`, the input of
    learner/verdict_stats.py `trajectory_metrics`; [] when no response has turns (a single-turn
    run: no trajectory metrics)."""
    responses = [r for sg in groups for r in sg.group.responses]
    if not any(r.turns for r in responses):
        return []
    return [
        ([t.passed for t in r.turns], sum(t.feedback_tokens for t in r.turns)) for r in responses
    ]


def component_inputs(groups: list[ScoredGroup]) -> list[dict[str, float]]:
    """Every response's reward components (`Score.components`), the input of
    learner/verdict_stats.py `reward_component_means`."""
    return [s.components for sg in groups for s in sg.result.scores]


@dataclass
class Intake:
    """The groups of one batch as rank 0 fetches them (actors/learner_rank.py `fetch_batch`):
    each reply of the buffer converted, the non-finite guard and THE dynamic filter applied, and
    what the batch's IntakeStats are taken over."""

    kept: list[GroupArrays] = field(default_factory=list)
    """The groups to train on, in the order fetched."""
    scored: dict[int, ScoredGroup] = field(default_factory=dict)
    """Every fetched group by id, with its verdicts (and texts when asked for)."""
    responses: list[list] = field(default_factory=list)
    """Every fetched response's token ids (diversity's n-grams); its length counts the budget."""
    rewards: list[float] = field(default_factory=list)
    """Every fetched response's reward, filtered groups included."""
    staleness: list[float] = field(default_factory=list)
    """The buffer's staleness of each kept group."""
    filtered: int = 0
    """Groups the dynamic filter dropped."""
    nonfinite: int = 0
    """Responses dropped for a NaN or infinite log-prob."""
    done: bool = False
    """The buffer said no more groups will come."""

    def add(self, batch, dynamic_filtering: bool) -> list[int]:
        """Take one reply of `BufferClient.get_batch`; returns the ids of the groups that will not
        be trained on (filtered or emptied), for `report_filtered`."""
        self.done = batch.done
        groups = [to_group_arrays(sg) for sg in batch.groups]
        self.scored.update((sg.group.group_id, sg) for sg in batch.groups)
        stale = dict(zip([g.group_id for g in groups], batch.staleness, strict=True))
        for g in groups:
            self.rewards += g.rewards.tolist()
            self.responses.append(model_tokens(g))  # diversity's n-grams (arrays)
        groups, bad, emptied = drop_nonfinite(groups)  # NaN/Inf log-probs: logged, dropped
        self.nonfinite += len(bad)
        good, dropped = signal_filter(groups, dynamic_filtering)
        self.kept += good
        self.staleness += [stale[g.group_id] for g in good]
        self.filtered += len(dropped)
        return [g.group_id for g in dropped] + emptied

    def stats(self, packed_from: float) -> IntakeStats:
        """The batch's IntakeStats; `pack_s` counts from `packed_from` (perf_counter)."""
        staleness = self.staleness
        rewards = self.rewards
        return IntakeStats(
            filtered_groups=self.filtered,
            reward_mean=sum(rewards) / max(len(rewards), 1),
            staleness_mean=sum(staleness) / len(staleness) if staleness else None,
            staleness_max=max(staleness) if staleness else None,
            diversity=batch_diversity(self.responses),
            pack_s=time.perf_counter() - packed_from,
            nonfinite_dropped=self.nonfinite,
        )

    def fetched(self) -> list[ScoredGroup]:
        """Every fetched group's ScoredGroup, filtered ones included, in the order fetched."""
        return list(self.scored.values())

    def trained(self) -> list[ScoredGroup]:
        """The kept groups' ScoredGroups (verdicts, texts), in the batch's order."""
        return [self.scored[g.group_id] for g in self.kept]

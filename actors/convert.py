"""Buffer messages -> learner records: a field copy, so neither side depends on the other."""

from __future__ import annotations

from microcoder.buffer.groups import ScoredGroup
from microcoder.learner.sample import SampleGroup, TrainSample


def to_sample_group(sg: ScoredGroup) -> SampleGroup:
    """One scored group as the learner's SampleGroup; empty responses are dropped (nothing to
    train on; they still counted in the judge's verdicts)."""
    prompt_ids = sg.group.prompt_ids.tolist()
    samples = [
        TrainSample(
            prompt_ids=prompt_ids,
            response_ids=r.response_ids.tolist(),
            behaviour_logprobs=r.logprobs.tolist(),
            temperature=r.temperature,
            reward=s.reward,
            truncated=r.truncated,
            verdict=s.verdict,
            policy_version=r.policy_version,
            last_policy_version=r.last_policy_version,
        )
        for r, s in zip(sg.group.responses, sg.result.scores, strict=True)
        if len(r.response_ids)
    ]
    return SampleGroup(group_id=str(sg.group.group_id), samples=samples)

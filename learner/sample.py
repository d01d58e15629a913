"""The learner's own input records: a scored response and a group of them.

These do not depend on the buffer's wire format; the actor layer converts buffer messages into
`TrainSample` / `SampleGroup` (plain lists and numbers, so the conversion is a field copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TrainSample:
    """One sampled and scored response to a prompt, as the learner trains on it."""

    prompt_ids: Sequence[int]
    """Token ids of the prompt (chat template applied); at least one token."""
    response_ids: Sequence[int]
    """Token ids the generator sampled (including the end-of-turn token if it emitted one)."""
    behaviour_logprobs: Sequence[float]
    """Generator log-prob of each response token at `temperature`; same length as response_ids."""
    temperature: float
    """Sampling temperature the response was generated with (> 0)."""
    reward: float
    """Reward from the executor (1 = all tests pass; a fraction with partial credit)."""
    truncated: bool
    """The response stopped at max_response_tokens instead of ending on its own."""
    verdict: str
    """Judge verdict (AC/WA/TLE/MLE/RE/OLE/CE/SE/unfinished or "" if not judged); see
    grpo.INCORRECT_VERDICTS."""
    policy_version: int
    """Learner version of the weights that sampled the response's first token (for staleness)."""
    last_policy_version: int | None = None
    """Version that sampled its last token (later than policy_version after an in-flight weight
    update); None when the producer did not record it. For metrics only (`mixed_version_frac`,
    `mismatch_by_span`)."""
    loss_mask: Sequence[int] | None = None
    """A multi-turn trajectory's mask over `response_ids`: 1 = a model token (trained on), 0 =
    a feedback token between turns (its behaviour log-prob is ignored); None = all 1."""

    def __post_init__(self) -> None:
        if len(self.prompt_ids) < 1:
            raise ValueError(
                "TrainSample needs a non-empty prompt (the first response token is predicted from it)"
            )
        if len(self.response_ids) < 1:
            raise ValueError(
                "TrainSample has an empty response; drop it before it reaches the learner"
            )
        if len(self.behaviour_logprobs) != len(self.response_ids):
            raise ValueError(
                f"behaviour_logprobs has {len(self.behaviour_logprobs)} entries for "
                f"{len(self.response_ids)} response tokens; the generator must report one per token"
            )
        if self.loss_mask is not None and len(self.loss_mask) != len(self.response_ids):
            raise ValueError(
                f"loss_mask has {len(self.loss_mask)} entries for {len(self.response_ids)} "
                "response tokens; mark each (1 = the model's token)"
            )
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


@dataclass(frozen=True)
class SampleGroup:
    """The G responses to one prompt; GRPO normalises rewards within a group."""

    group_id: str
    """Identifier of the group (for logs and accounting)."""
    samples: Sequence[TrainSample]
    """The responses; all share the same prompt."""

    @property
    def rewards(self) -> list[float]:
        """Rewards of the responses, in order."""
        return [s.reward for s in self.samples]

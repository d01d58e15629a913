"""The data a group carries through the buffer: Response, Group, Score, GroupScores, ScoredGroup.

Plain typed dataclasses. Their one wire form is buffer/codec.py (columnar frames, checked in
one pass), which also fixes the array dtypes named here: token ids int32, log-probs and test
times float32, each 4 bytes on the wire. The messages that carry them, and the generic codec
for every other record, are in buffer/messages.py and buffer/records.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Response:
    """One sampled completion of a group's prompt (the prompt ids live on the Group)."""

    response_ids: np.ndarray
    """Generated token ids (int32)."""
    logprobs: np.ndarray
    """Behaviour log-prob of each generated token under the sampling policy at `temperature`."""
    text: str = ""
    """Decoded response text (what the executor runs)."""
    temperature: float = 1.0
    """Sampling temperature the response was drawn at."""
    policy_version: int = 0
    """Version of the weights that produced its first token (learner optimizer steps completed):
    the oldest version in it, what staleness is measured from."""
    truncated: bool = False
    """True when generation stopped at max_response_tokens."""
    finish_reason: str = ""
    """vLLM's finish reason: 'stop', 'length', ..."""
    gen_time_s: float = 0.0
    """Wall seconds of the engine call that sampled it (one call per group when streaming, one
    per wave with waves: every response of the call carries the same value)."""
    last_policy_version: int | None = None
    """Version of the weights that produced its last token; differs from `policy_version` when
    the weights were updated while it was sampled (in-flight update). None when unknown (old
    messages, or a producer that does not track it). For metrics only: staleness uses
    `policy_version`."""


@dataclass
class Group:
    """One prompt with its G responses; moves through the buffer as one unit, never split.

    Each consumer gets the parts it reads (codec.py): executors get groups without tokens
    (`get_unscored(tokens=False)`, the default), whose `prompt_ids` and response `response_ids`
    and `logprobs` are None; the learner gets them without text (`get_batch(text=False)`, the
    default), whose `prompt` and response `text` are None."""

    group_id: int
    """The id from the PromptAssignment."""
    problem_id: str
    """Dataset id of the problem."""
    prompt: str = ""
    """Prompt text as given to the generator."""
    prompt_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    """Token ids of the rendered prompt, shared by every response of the group (int32)."""
    responses: list[Response] = field(default_factory=list)
    """The G responses."""
    generator: str = ""
    """Owner id of the generator that produced it."""

    @property
    def min_policy_version(self) -> int:
        """Oldest policy version among the responses (what staleness is measured from)."""
        return min((r.policy_version for r in self.responses), default=0)

    @property
    def n_responses(self) -> int:
        return len(self.responses)

    @property
    def n_tokens(self) -> int:
        """Response tokens of the group."""
        return sum(len(r.response_ids) for r in self.responses)


@dataclass
class Score:
    """The judge's verdict on one response."""

    reward: float
    """Scalar reward (1.0 all tests pass; partial credit if configured)."""
    verdict: str
    """AC, WA, TLE, MLE, RE, OLE, CE, SE or unfinished (microcoder.sandbox.VERDICTS)."""
    tests_passed: int = 0
    """Tests passed."""
    tests_total: int = 0
    """Tests of the problem (tests actually run may be fewer with early exit)."""
    detail: str = ""
    """Short diagnostic (first differing line, error tail)."""
    extraction: str = ""
    """What extraction gave the judge (sandbox/extract.py `Extraction.status`): `ok`, `no_code`
    (nothing to run, judged WA) or `unfinished`; "" when the executor did not say (older ones).
    The step's verdict metrics count `no_code` apart from WA (learner/verdict_stats.py)."""
    components: dict[str, float] = field(default_factory=dict)
    """Named reward components the reward function returned (`executor.reward`,
    sandbox/rewards.py); {} for none. Their step means are logged as `reward_components`."""


@dataclass
class GroupScores:
    """An executor's result for one group: one Score per response, in response order."""

    group_id: int
    """The group scored."""
    scores: list[Score] = field(default_factory=list)
    """One per response."""
    executor: str = ""
    """Owner id of the executor."""

    @property
    def n_scores(self) -> int:
        return len(self.scores)


@dataclass
class ScoredGroup:
    """A Group with its GroupScores: what the learner consumes."""

    group: Group
    result: GroupScores

    @property
    def rewards(self) -> np.ndarray:
        """Reward per response (float32)."""
        return np.array([s.reward for s in self.result.scores], dtype=np.float32)

    @property
    def verdicts(self) -> list[str]:
        """Verdict per response."""
        return [s.verdict for s in self.result.scores]

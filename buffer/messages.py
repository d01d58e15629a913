"""Every record and message that crosses the buffer's wire, with its meaning.

Data records (what flows: prompts -> groups -> scores):
  PromptAssignment, Response, Group, Score, GroupScores, and ScoredGroup (a Group with its
  scores; the executor uploads only the scores, never the tokens).
Requests (client -> server) and replies (server -> client) carry a `KIND`; on the wire each
message is a msgpack header map {"v": PROTOCOL_VERSION, "kind": KIND, "rid": request id, ...}
followed by the bulk frames of the Groups it carries (layouts in codec.py; their small parts,
and GroupScores, ride in the header as msgpack bin values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from microcoder.buffer.records import Record, array_field, record_field

PROTOCOL_VERSION = 4
"""Bumped on any incompatible change; a peer speaking another version gets an `error` reply.
2: GetBatch.filtered (a version-1 server would ignore the reports and could deadlock).
3: columnar Group (meta, text, tensors) and GroupScores layouts, small parts in the header;
   consumers choose parts (GetUnscored.tokens, GetBatch.text).
4: fields nobody read are gone: Score.test_verdicts, GroupScores.score_time_s, Group.timings."""

# ---------------------------------------------------------------- data records


@dataclass
class PromptAssignment(Record):
    """One prompt leased to a generator: it must come back as a Group with the same group_id
    (or be reported with `fail_group`, or be returned by `release`)."""

    group_id: int
    """Unique id of the group slot this prompt opens; the Group must carry it."""
    problem_id: str
    """Id of the problem in the dataset (executors look the tests up by it)."""
    prompt: str
    """The problem statement to render into the model's prompt."""
    epoch: int = 0
    """Pass over the dataset this assignment belongs to."""
    issued_version: int = 0
    """Learner version when the prompt was handed out."""


@dataclass
class Response(Record):
    """One sampled completion of a group's prompt (the prompt ids live on the Group)."""

    response_ids: np.ndarray = array_field("<i4")
    """Generated token ids (int32)."""
    logprobs: np.ndarray = array_field("<f4")
    """Behaviour log-prob of each generated token under the sampling policy at `temperature`."""
    text: str = ""
    """Decoded response text (what the executor runs)."""
    temperature: float = 1.0
    """Sampling temperature the response was drawn at."""
    policy_version: int = 0
    """Version of the weights that produced it (learner optimizer steps completed)."""
    truncated: bool = False
    """True when generation stopped at max_response_tokens."""
    finish_reason: str = ""
    """vLLM's finish reason: 'stop', 'length', ..."""
    gen_time_s: float = 0.0
    """Wall seconds of the engine call that sampled it (one call per wave: every response of a
    wave carries the same value)."""


@dataclass
class Group(Record):
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
    prompt_ids: np.ndarray = array_field("<i4", default_factory=lambda: np.zeros(0, np.int32))
    """Token ids of the rendered prompt, shared by every response of the group (int32)."""
    responses: list[Response] = record_field(Response, many=True)
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
class Score(Record):
    """The judge's verdict on one response."""

    reward: float
    """Scalar reward (1.0 all tests pass; partial credit if configured)."""
    verdict: str
    """AC, WA, TLE, MLE, RE, OLE, CE or SE (microcoder.sandbox.VERDICTS)."""
    tests_passed: int = 0
    """Tests passed."""
    tests_total: int = 0
    """Tests of the problem (tests actually run may be fewer with early exit)."""
    test_times_s: np.ndarray = array_field("<f4", default_factory=lambda: np.zeros(0, np.float32))
    """Wall seconds per test run (float32)."""
    detail: str = ""
    """Short diagnostic (first differing line, error tail)."""


@dataclass
class GroupScores(Record):
    """An executor's result for one group: one Score per response, in response order."""

    group_id: int
    """The group scored."""
    scores: list[Score] = record_field(Score, many=True)
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


# ---------------------------------------------------------------- requests


@dataclass
class Message(Record):
    """A header record; KIND names it on the wire."""

    KIND: ClassVar[str] = ""


@dataclass
class GetPrompts(Message):
    """Generator asks for up to `n` prompts (subject to admission control); they are leased to
    `owner`. With wait_s > 0 the server holds the request until at least one is available."""

    KIND: ClassVar[str] = "get_prompts"
    owner: str
    n: int
    wait_s: float = 0.0


@dataclass
class PutUnscored(Message):
    """Generator hands in Groups for prompts it holds: each Group's meta (codec.py) in `metas`,
    its text and tensors frames after the header, in the same order."""

    KIND: ClassVar[str] = "put_unscored"
    owner: str
    metas: list[bytes] = field(default_factory=list)


@dataclass
class GetUnscored(Message):
    """Executor asks for up to `n` unscored groups, leased to `owner` until scored or failed.
    With `tokens` false each group's meta and text frames travel (all a judge needs); true adds
    its tensors frame (prompt and response ids, log-probs)."""

    KIND: ClassVar[str] = "get_unscored"
    owner: str
    n: int
    wait_s: float = 0.0
    tokens: bool = False


@dataclass
class PutScored(Message):
    """Executor hands in GroupScores (each encoded by codec.scores_frame; small, so they ride
    in the header) for groups it holds."""

    KIND: ClassVar[str] = "put_scored"
    owner: str
    scores: list[bytes] = field(default_factory=list)


@dataclass
class FailGroup(Message):
    """Owner gives up on a group it holds (prompt or unscored group): counted as failed."""

    KIND: ClassVar[str] = "fail_group"
    owner: str
    group_id: int
    reason: str = ""


@dataclass
class Release(Message):
    """Return every lease of `owner` (e.g. its actor died): prompts are re-queued and counted as
    failed attempts, unscored groups go back to the front of their queue."""

    KIND: ClassVar[str] = "release"
    owner: str
    died: bool = False
    """The owner's process died: each prompt it held counts towards quarantine
    (buffer/quarantine.py); a clean release (scale-down, shutdown) does not."""


@dataclass
class GetBatch(Message):
    """Learner at `version` asks for exactly `n` scored groups within the staleness bound, and
    reports groups of earlier batches it consumed but did not train on (dynamic filtering)."""

    KIND: ClassVar[str] = "get_batch"
    owner: str
    n: int
    version: int
    wait_s: float = 0.0
    filtered: list[int] = field(default_factory=list)
    """Ids of delivered groups the learner dropped without training (all rewards equal). Applied
    before the batch is assembled; each id counts once, so resending after a timeout is safe."""
    text: bool = False
    """Also send each group's text frame (prompt and response texts); the learner trains on
    token ids and does not need it."""


@dataclass
class AnnounceVersion(Message):
    """The learner finished optimizer step `version` (new weights exist)."""

    KIND: ClassVar[str] = "announce_version"
    version: int


@dataclass
class GetStats(Message):
    """Ask for counters, depths, rates and the staleness histogram."""

    KIND: ClassVar[str] = "get_stats"


@dataclass
class Snapshot(Message):
    """Write everything accepted but not consumed, counters and the prompt cursor to `path`."""

    KIND: ClassVar[str] = "snapshot"
    path: str


@dataclass
class Restore(Message):
    """Replace the server's state by the snapshot at `path` (outstanding leases are returned)."""

    KIND: ClassVar[str] = "restore"
    path: str


# ---------------------------------------------------------------- replies


@dataclass
class Prompts(Message):
    """Reply to GetPrompts. Empty with done=False: admission control says wait `retry_after_s`."""

    KIND: ClassVar[str] = "prompts"
    assignments: list[PromptAssignment] = record_field(PromptAssignment, many=True)
    done: bool = False
    """The prompt source is exhausted: no more prompts will ever come."""
    retry_after_s: float = 0.0


@dataclass
class PutReply(Message):
    """Reply to a put: which group ids were accepted, which were refused because the queue is at
    its high-water mark (retry them), and which were rejected for good (with the reason)."""

    KIND: ClassVar[str] = "put_reply"
    accepted: list[int] = field(default_factory=list)
    full: list[int] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


@dataclass
class Groups(Message):
    """Reply to GetUnscored: each Group's meta in `metas`; after the header, per Group its text
    frame, then its tensors frame if `tokens`; `done`: nothing more will ever come."""

    KIND: ClassVar[str] = "groups"
    done: bool = False
    tokens: bool = False
    metas: list[bytes] = field(default_factory=list)


@dataclass
class Batch(Message):
    """Reply to GetBatch: per group its meta in `metas` and its GroupScores in `scores`; after
    the header, per group its text frame (only if `text`) and tensors frame; none if not ready.
    `staleness` lists each delivered group's staleness; `done`: nothing more will ever come."""

    KIND: ClassVar[str] = "batch"
    version: int = 0
    staleness: list[int] = field(default_factory=list)
    done: bool = False
    text: bool = False
    metas: list[bytes] = field(default_factory=list)
    scores: list[bytes] = field(default_factory=list)


@dataclass
class Ok(Message):
    """Generic success."""

    KIND: ClassVar[str] = "ok"
    detail: str = ""


@dataclass
class Released(Message):
    """Reply to Release: how many prompt and group leases were returned."""

    KIND: ClassVar[str] = "released"
    prompts: int = 0
    groups: int = 0


@dataclass
class Stats(Message):
    """Reply to GetStats; keys documented in buffer/accounting.py."""

    KIND: ClassVar[str] = "stats"
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class SnapshotDone(Message):
    """Reply to Snapshot/Restore: the file and how many groups it holds."""

    KIND: ClassVar[str] = "snapshot_done"
    path: str = ""
    groups: int = 0
    nbytes: int = 0


@dataclass
class Error(Message):
    """Reply to anything the server could not accept: `code` is a counter name, `message` says
    what was wrong and how to fix it."""

    KIND: ClassVar[str] = "error"
    code: str = ""
    message: str = ""


KINDS: dict[str, type[Message]] = {
    c.KIND: c
    for c in (
        GetPrompts,
        PutUnscored,
        GetUnscored,
        PutScored,
        FailGroup,
        Release,
        GetBatch,
        AnnounceVersion,
        GetStats,
        Snapshot,
        Restore,
        Prompts,
        PutReply,
        Groups,
        Batch,
        Ok,
        Released,
        Stats,
        SnapshotDone,
        Error,
    )
}
"""Every message kind, by its wire name."""

"""Every message that crosses the buffer's wire, with its meaning.

Requests (client -> server) and replies (server -> client) carry a `KIND`; on the wire each
message is a msgpack header map {"v": PROTOCOL_VERSION, "kind": KIND, "rid": request id, ...}
(encoded by the generic codec, buffer/records.py) followed by the bulk frames of the Groups it
carries. The Groups and GroupScores themselves (buffer/groups.py) have one wire form, codec.py:
their small parts ride in the header as msgpack bin values, their text and tensors after it.
The one data record here is PromptAssignment, which rides in the Prompts reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from microcoder.buffer.records import Record, record_field

PROTOCOL_VERSION = 4
"""Bumped on any incompatible change; a peer speaking another version gets an `error` reply.
2: GetBatch.filtered (a version-1 server would ignore the reports and could deadlock).
3: columnar Group (meta, text, tensors) and GroupScores layouts, small parts in the header;
   consumers choose parts (GetUnscored.tokens, GetBatch.text).
4: fields nobody read are gone: Score.test_verdicts, Score.test_times_s, GroupScores.score_time_s,
   Group.timings."""

# ---------------------------------------------------------------- the lease record


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
    version: int = -1
    """The newest learner version announced to the buffer (`AnnounceVersion`) when it answered;
    -1 unknown. A generator whose weights are that version needs not ask learner rank 0 for
    newer ones before it samples the prompts (actors/stream.py)."""


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

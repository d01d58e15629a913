"""Every type that crosses a process boundary, in the order a group meets them.

The launcher hands the buffer actor `TrainingPrompt`s (a Ray argument). Over ZeroMQ, the buffer
leases a generator a `PromptAssignment`; the generator puts a `Group` of `Response`s; an
executor leases it and puts a `GroupScores` of `Score`s; learner rank 0 gets `ScoredGroup`s,
read as a `LearnerBatch`. Each of those rides in a `Message` (one kind per request and reply,
`KINDS`) at `PROTOCOL_VERSION`. Rank 0 broadcasts a `PackedBatch` to the other learner ranks
(torch.distributed), and after each step sends the weights to the generators, each round
described by a `WeightSyncHeader`. Every actor answers the launcher's `memory()` with an
`ActorMemory` (a Ray reply).

Why here: `microcoder/` is the bottom room, which every room may import; buffer/ may not import
torch and learner/ may not import buffer/, so no other room could hold the types both use, and a
reader finds the whole protocol in one file. Types only: the wire forms are codecs that import them (buffer/records.py
for messages, buffer/codec.py for Group and GroupScores, buffer/wire.py for framing,
learner/intake.py `broadcast` for the PackedBatch, learner/sync/transport.py for the weights),
except the weight-sync header's own small JSON. It imports only the standard library (numpy and
torch name array types in annotations), so any process may read it cheaply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

if TYPE_CHECKING:  # annotations only: this module imports nothing outside the standard library
    import numpy as np
    import torch

PROTOCOL_VERSION = 4
"""The buffer's wire version; bumped on any incompatible change; a peer speaking another version
gets an `error` reply.
2: GetBatch.filtered (a version-1 server would ignore the reports and could deadlock).
3: columnar Group (meta, text, tensors) and GroupScores layouts, small parts in the header;
   consumers choose parts (GetUnscored.tokens, GetBatch.text).
4: fields nobody read are gone: Score.test_verdicts, Score.test_times_s, GroupScores.score_time_s,
   Group.timings."""


def _numpy():
    import numpy

    return numpy


# ---------------------------------------------------------------- launcher -> buffer actor


class TrainingPrompt(NamedTuple):
    """A training problem the buffer hands out: rendered and measured once by the launcher
    (launch/run/problems.py) and given to the buffer actor as a constructor argument."""

    problem_id: str
    """Id of the problem in the dataset (executors look the tests up by it)."""
    prompt: str
    """The rendered prompt text."""


# ---------------------------------------------------------------- buffer -> generator: the lease


@dataclass
class PromptAssignment:
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
    source: str = ""
    """Name of the data source it was drawn from (data.sources' display name; per-source
    metrics). The Group carries it on to the learner."""


# ---------------------------------------------------------------- generator -> buffer -> consumers


@dataclass
class Response:
    """One sampled completion of a group's prompt (the prompt ids live on the Group). Token ids
    are int32 and log-probs float32 on the wire (buffer/codec.py)."""

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
    loss_mask: np.ndarray | None = None
    """Multi-turn trajectories only (`environment.kind` other than "single"): one uint8 per
    `response_ids` token, 1 where the model sampled it (its `logprobs` entry is the behaviour
    log-prob), 0 for the environment's feedback tokens between turns (their `logprobs` entry is
    0 and the loss never reads it). None: every token is the model's (a single turn)."""
    turns: list[Turn] = field(default_factory=list)
    """Multi-turn trajectories only: the model's turns in order (empty for a single turn). The
    response's `text` is the last turn's text (what the executor judges), `truncated` and
    `finish_reason` are the last turn's, `policy_version` the oldest turn's."""
    env_reward: float | None = None
    """A user environment's reward for the trajectory (`EnvStep.reward` when done); None (every
    built-in environment): the executor judges `text` on all tests, as for a single turn."""


@dataclass
class Turn:
    """One model turn of a multi-turn trajectory (actors/environments/): where its tokens sit in
    the trajectory's `response_ids`, what the model wrote and what the environment answered."""

    start: int
    """Index in `response_ids` of the turn's first model token."""
    end: int
    """One past its last model token; the feedback tokens that follow (if any) run from here to
    the next turn's `start`."""
    text: str = ""
    """The turn's decoded response."""
    feedback: str = ""
    """The text of the messages the environment appended after it ("" for the last turn)."""
    feedback_tokens: int = 0
    """Token count of that feedback (chat-template tokens included)."""
    policy_version: int = 0
    """Version of the weights that produced the turn's first token."""
    truncated: bool = False
    """The turn stopped at its token cap."""
    passed: bool | None = None
    """Whether the turn's answer passed the environment's check (`repair`: the visible tests);
    None when the environment did not check it."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The environment's named metrics for this turn (`EnvStep.metrics`)."""


@dataclass
class Group:
    """One prompt with its G responses; moves through the buffer as one unit, never split.

    Each consumer gets the parts it reads (buffer/codec.py): executors get groups without tokens
    (`get_unscored(tokens=False)`, the default), whose `prompt_ids` and response `response_ids`
    and `logprobs` are None; the learner gets them without text (`get_batch(text=False)`, the
    default), whose `prompt` and response `text` are None."""

    group_id: int
    """The id from the PromptAssignment."""
    problem_id: str
    """Dataset id of the problem."""
    prompt: str = ""
    """Prompt text as given to the generator."""
    prompt_ids: np.ndarray = field(default_factory=lambda: _numpy().zeros(0, "int32"))
    """Token ids of the rendered prompt, shared by every response of the group (int32)."""
    responses: list[Response] = field(default_factory=list)
    """The G responses."""
    generator: str = ""
    """Owner id of the generator that produced it."""
    source: str = ""
    """Name of the data source of its prompt, copied from the PromptAssignment (the buffer
    refuses a group whose source is not its slot's); the learner's per-source metrics read it."""

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


# ---------------------------------------------------------------- environments (multi-turn)


@dataclass
class ProgramRun:
    """What an environment's sandbox call returns (actors/environments/base.py `EnvSandbox`): one
    program run on the tests it was given (a repair environment gives the visible ones only), in
    the executor pool. Excerpts are the judge's own (sandbox/verdict.py `Verdict`)."""

    verdict: str
    """One of sandbox/verdict.py VERDICTS."""
    passed: int
    """Tests passed."""
    total: int
    """Tests run."""
    first_failed: int | None = None
    """Index (in the tests given) of the first failing test; None when all passed."""
    message: str = ""
    """The judge's short reason (a mismatch, an exception, a limit)."""
    stdout: str = ""
    """Excerpt of the program's stdout on the failing test."""
    stderr: str = ""
    """Excerpt (the tail) of its stderr on the failing test."""
    time_s: float = 0.0
    """Wall seconds the program ran, summed over its tests."""


@dataclass
class EnvStep:
    """An environment's answer to one model turn (`Environment.step`)."""

    done: bool
    """The trajectory ends with this turn."""
    reward: float | None = None
    """When done: the trajectory's reward from the environment itself; None (the built-in
    environments): the executor judges the final turn on all tests, as for a single turn."""
    feedback: list[dict[str, str]] = field(default_factory=list)
    """When not done: the chat messages (`{"role": "user", "content": ...}`) appended before the
    model's next turn."""
    passed: bool | None = None
    """Whether this turn's answer passed the environment's check (recorded in `Turn.passed`)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Named numbers about the turn (recorded in `Turn.metrics`)."""


# ---------------------------------------------------------------- executor -> buffer: the scores


@dataclass
class Score:
    """The judge's verdict on one response."""

    reward: float
    """Scalar reward (1.0 all tests pass; partial credit if configured)."""
    verdict: str
    """AC, WA, TLE, MLE, RE, OLE, CE, SE or unfinished (microcoder.sandbox.VERDICTS)."""
    tests_passed: int = 0
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
    sandbox/rewards/plugin.py); {} for none. Their step means are logged as `reward_components`."""


@dataclass
class GroupScores:
    """An executor's result for one group: one Score per response, in response order."""

    group_id: int
    scores: list[Score] = field(default_factory=list)
    executor: str = ""
    """Owner id of the executor."""

    @property
    def n_scores(self) -> int:
        return len(self.scores)


# ---------------------------------------------------------------- buffer -> learner rank 0


@dataclass
class ScoredGroup:
    """A Group (without text unless asked) with its GroupScores: what the learner consumes."""

    group: Group
    result: GroupScores

    @property
    def rewards(self) -> np.ndarray:
        """Reward per response (float32)."""
        return _numpy().array([s.reward for s in self.result.scores], dtype="float32")

    @property
    def verdicts(self) -> list[str]:
        return [s.verdict for s in self.result.scores]


@dataclass
class LearnerBatch:
    """A `Batch` reply as `BufferClient.get_batch` returns it: the groups and, per group, its
    staleness at `version`."""

    groups: list[ScoredGroup]
    version: int
    staleness: list[int]
    done: bool
    """The run is finished: no more groups will ever come (the batch may be short)."""


# ---------------------------------------------------------------- buffer messages: requests

KINDS: dict[str, type[Message]] = {}
"""Every message kind, by its wire name (filled as each Message class is defined)."""


@dataclass
class Message:
    """A buffer request or reply; KIND names it on the wire. On the wire each is a msgpack map
    {"v": PROTOCOL_VERSION, "kind": KIND, "rid": request id, <fields>} (buffer/wire.py, checked
    field by field by buffer/records.py), followed by the bulk frames of the Groups it carries."""

    KIND: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if not kind or kind in KINDS:
            raise TypeError(f"{cls.__name__}: message kind {kind!r} is empty or taken")
        cls.KIND = kind
        KINDS[kind] = cls


@dataclass
class GetPrompts(Message, kind="get_prompts"):
    """Generator asks for up to `n` prompts (subject to admission control); they are leased to
    `owner`. With wait_s > 0 the server holds the request until at least one is available."""

    owner: str
    n: int
    wait_s: float = 0.0


@dataclass
class PutUnscored(Message, kind="put_unscored"):
    """Generator hands in Groups for prompts it holds: each Group's meta (codec.py) in `metas`,
    its text and tensors frames after the header, in the same order."""

    owner: str
    metas: list[bytes] = field(default_factory=list)


@dataclass
class GetUnscored(Message, kind="get_unscored"):
    """Executor asks for up to `n` unscored groups, leased to `owner` until scored or failed.
    With `tokens` false each group's meta and text frames travel (all a judge needs); true adds
    its tensors frame (prompt and response ids, log-probs)."""

    owner: str
    n: int
    wait_s: float = 0.0
    tokens: bool = False


@dataclass
class PutScored(Message, kind="put_scored"):
    """Executor hands in GroupScores (each encoded by codec.scores_frame; small, so they ride
    in the header) for groups it holds."""

    owner: str
    scores: list[bytes] = field(default_factory=list)


@dataclass
class FailGroup(Message, kind="fail_group"):
    """Owner gives up on a group it holds (prompt or unscored group): counted as failed."""

    owner: str
    group_id: int
    reason: str = ""


@dataclass
class Release(Message, kind="release"):
    """Return every lease of `owner` (e.g. its actor died): prompts are re-queued and counted as
    failed attempts, unscored groups go back to the front of their queue."""

    owner: str
    died: bool = False
    """The owner's process died: each prompt it held counts towards quarantine
    (buffer/quarantine.py); a clean release (scale-down, shutdown) does not."""


@dataclass
class GetBatch(Message, kind="get_batch"):
    """Learner at `version` asks for exactly `n` scored groups within the staleness bound, and
    reports groups of earlier batches it consumed but did not train on (dynamic filtering)."""

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
class AnnounceVersion(Message, kind="announce_version"):
    """The learner finished optimizer step `version` (new weights exist)."""

    version: int


@dataclass
class GetStats(Message, kind="get_stats"):
    """Ask for counters, depths, rates and the staleness histogram."""


@dataclass
class Snapshot(Message, kind="snapshot"):
    """Write everything accepted but not consumed, counters and the prompt cursor to `path`."""

    path: str


@dataclass
class Restore(Message, kind="restore"):
    """Replace the server's state by the snapshot at `path` (outstanding leases are returned)."""

    path: str


# ---------------------------------------------------------------- buffer messages: replies


@dataclass
class Prompts(Message, kind="prompts"):
    """Reply to GetPrompts. Empty with done=False: admission control says wait `retry_after_s`."""

    assignments: list[PromptAssignment] = field(default_factory=list)
    done: bool = False
    """The prompt source is exhausted: no more prompts will ever come."""
    retry_after_s: float = 0.0
    version: int = -1
    """The newest learner version announced to the buffer (`AnnounceVersion`) when it answered;
    -1 unknown. A generator whose weights are that version needs not ask learner rank 0 for
    newer ones before it samples the prompts (actors/generate_loop.py)."""


@dataclass
class PutReply(Message, kind="put_reply"):
    """Reply to a put: which group ids were accepted, which were refused because the queue is at
    its high-water mark (retry them), and which were rejected for good (with the reason)."""

    accepted: list[int] = field(default_factory=list)
    full: list[int] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


@dataclass
class Groups(Message, kind="groups"):
    """Reply to GetUnscored: each Group's meta in `metas`; after the header, per Group its text
    frame, then its tensors frame if `tokens`; `done`: nothing more will ever come."""

    done: bool = False
    tokens: bool = False
    metas: list[bytes] = field(default_factory=list)


@dataclass
class Batch(Message, kind="batch"):
    """Reply to GetBatch: per group its meta in `metas` and its GroupScores in `scores`; after
    the header, per group its text frame (only if `text`) and tensors frame; none if not ready.
    `staleness` lists each delivered group's staleness; `done`: nothing more will ever come."""

    version: int = 0
    staleness: list[int] = field(default_factory=list)
    done: bool = False
    text: bool = False
    metas: list[bytes] = field(default_factory=list)
    scores: list[bytes] = field(default_factory=list)


@dataclass
class Ok(Message, kind="ok"):
    """Generic success."""

    detail: str = ""


@dataclass
class Released(Message, kind="released"):
    """Reply to Release: how many prompt and group leases were returned."""

    prompts: int = 0
    groups: int = 0


@dataclass
class Stats(Message, kind="stats"):
    """Reply to GetStats; keys documented in buffer/accounting.py."""

    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class SnapshotDone(Message, kind="snapshot_done"):
    """Reply to Snapshot/Restore: the file and how many groups it holds."""

    path: str = ""
    groups: int = 0
    nbytes: int = 0


@dataclass
class Error(Message, kind="error"):
    """Reply to anything the server could not accept: `code` is a counter name, `message` says
    what was wrong and how to fix it."""

    code: str = ""
    message: str = ""


# ---------------------------------------------------------------- rank 0 -> every learner rank


@dataclass(frozen=True)
class PackedBatch:
    """The batch every rank trains on: S sequences of G groups, T tokens, R response tokens.
    Built by learner/intake.py `pack`, broadcast field by field by `broadcast` (its `_SPEC`
    fixes each field's dtype and size)."""

    group_ids: torch.Tensor  # [G] int64
    group_index: torch.Tensor  # [S] int64 in [0, G): each sequence's group
    tokens: torch.Tensor  # [T] int32: prompt then response, sequence after sequence
    prompt_lens: torch.Tensor  # [S] int64
    response_lens: torch.Tensor  # [S] int64
    behaviour_logprobs: torch.Tensor  # [R] float32, response tokens in sequence order
    rewards: torch.Tensor  # [S] float32
    temperatures: torch.Tensor  # [S] float32
    truncated: torch.Tensor  # [S] bool
    non_incorrect: torch.Tensor  # [S] bool
    policy_versions: torch.Tensor  # [S] int64
    last_policy_versions: torch.Tensor  # [S] int64
    response_mask: torch.Tensor  # [R] bool: the model's tokens (False: a multi-turn
    # trajectory's feedback tokens, which the loss never reads; all True for single turns)

    def __len__(self) -> int:
        return len(self.prompt_lens)

    @property
    def sizes(self) -> dict[str, int]:
        return {
            "G": len(self.group_ids),
            "S": len(self.prompt_lens),
            "T": len(self.tokens),
            "R": len(self.behaviour_logprobs),
        }


# ---------------------------------------------------------------- learner rank 0 -> generators


@dataclass
class TensorEntry:
    """Where one tensor lies in a weight-sync round."""

    name: str
    dtype: str
    """torch dtype name without the `torch.` prefix (`bfloat16`)."""
    shape: list[int]
    bucket: int
    """Index of the bucket that carries it."""
    offset: int
    """Byte offset inside that bucket (aligned, so the tensor is viewed in place)."""


@dataclass
class WeightSyncHeader:
    """What precedes one weight-sync round's buckets (learner/sync/transport.py): the version of the
    weights, each bucket's size, and every tensor's place. JSON on the wire (no pickle):
    {"version": V, "buckets": [{"nbytes": N}, ...], "tensors": [[name, dtype, shape, bucket,
    offset], ...]}."""

    version: int
    buckets: list[int]
    """Bytes of each bucket, in broadcast order."""
    tensors: list[TensorEntry]
    """In the sender's order."""

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": self.version,
                "buckets": [{"nbytes": n} for n in self.buckets],
                "tensors": [[t.name, t.dtype, t.shape, t.bucket, t.offset] for t in self.tensors],
            }
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> WeightSyncHeader:
        d = json.loads(raw.decode())
        tensors = [TensorEntry(*entry) for entry in d["tensors"]]
        return cls(int(d["version"]), [b["nbytes"] for b in d["buckets"]], tensors)


# ---------------------------------------------------------------- every actor -> the launcher


@dataclass(frozen=True)
class ActorMemory:
    """One actor's memory as its own process measures it (actors/memory.py `measure`): the reply
    of every actor's `memory()` (a Ray call). The launcher puts the run's in each step record
    (`memory`, launch/monitor/memory_view.py), `microcoder status`, the dashboard and Prometheus.
    Device figures are None (absent, never 0) where the actor has no CUDA device."""

    actor: str
    """The actor's name: `generator-0`, `executor-1`, `learner-0` (rank 0), `buffer`."""
    pool: str
    """Its pool: one of `MEMORY_POOLS`."""
    rss_bytes: int
    """Resident memory of the actor's process and every process below it (a generator's vLLM
    EngineCore and its workers, an executor's sandbox workers). Summed: pages the processes
    share (a fork's copy-on-write pages) count once per process."""
    processes: int = 1
    """Processes summed in `rss_bytes` (the actor's own and its descendants)."""
    peak_rss_bytes: int = 0
    """The highest resident memory of the actor's own process since it started (getrusage
    ru_maxrss; its descendants not counted)."""
    device_allocated_bytes: int | None = None
    """CUDA memory held by live tensors (torch.cuda.memory_allocated; for an engine summed over
    its workers)."""
    device_reserved_bytes: int | None = None
    """CUDA memory torch's caching allocator holds (torch.cuda.memory_reserved)."""
    device_peak_bytes: int | None = None
    """The highest `device_allocated_bytes` since the process started
    (torch.cuda.max_memory_allocated)."""
    device_total_bytes: int | None = None
    """The memory of the actor's GPU(s) (torch.cuda.get_device_properties().total_memory)."""
    kv_cache_usage: float | None = None
    """A generator's vLLM KV cache in use, a fraction in [0, 1] (vLLM's scheduler stats at its
    newest engine step, 0 once an idle engine's requests are done; None before the first step
    and for other actors)."""
    kv_cache_peak: float | None = None
    """The highest `kv_cache_usage` of the last 30 s (actors/memory.py KV_WINDOW_S)."""
    time: float = 0.0
    """Unix time of the measurement."""

    def figures(self) -> dict[str, float]:
        """The numeric fields that were measured (None ones left out): a record's per-actor map
        and the names `microcoder status --json` shows."""
        out: dict[str, float] = {}
        for name in MEMORY_FIGURES:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


MEMORY_POOLS = ("generator", "eval-generator", "executor", "learner", "buffer")
"""The pools an `ActorMemory` may name, in the order status shows them ("eval-generator": the
generators set aside for the eval, eval.generators; the launcher names their pool)."""
MEMORY_FIGURES = (
    "rss_bytes",
    "processes",
    "peak_rss_bytes",
    "device_allocated_bytes",
    "device_reserved_bytes",
    "device_peak_bytes",
    "device_total_bytes",
    "kv_cache_usage",
    "kv_cache_peak",
)
"""`ActorMemory`'s figures, in the order records, status and Prometheus list them."""

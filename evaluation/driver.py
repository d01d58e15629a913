"""The pipelined loop of an evaluation on Ray actor handles.

Generation is cut into calls of about `sequences_per_call` sequences, sent round-robin to the
generators with `calls_in_flight` queued per generator. As each call's samples come back their
programs are extracted (microcoder.sandbox.extract under `settings.reasoning`, as in training)
and sent to the executors at once (a reply cut inside its reasoning or its final code block is
not sent: verdict `unfinished`, as in training), `judge_calls_in_flight` calls per executor, so
judging runs while the generators go on. The reply to a problem of a kind the sandbox does not
run (`answer`, data/problem.py JUDGED_KINDS) is not extracted: the whole reply goes to an
executor's `score_replies`, which scores it with the run's reward function (`executor.reward`)
as training does: AC for a reward >= 1, else WA. A sample is written (samples.jsonl) as soon as all its budgets are judged.
Every call has a deadline; an actor error stops the evaluation with the actor's name and the
remedy (what was written is kept for --resume).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from microcoder.data.problem import JUDGED_KINDS, Problem
from microcoder.evaluation.plan import Todo, next_chunk
from microcoder.evaluation.samples import SampleRecord
from microcoder.evaluation.settings import EvalError, EvalSettings
from microcoder.sandbox import extract

NO_CODE = {
    "verdict": "WA",
    "passed": False,
    "tests_passed": 0,
    "first_failed": None,
    "message": "no code found in the response",
}
UNFINISHED = {
    "verdict": "unfinished",
    "passed": False,
    "tests_passed": 0,
    "first_failed": None,
    "message": "unfinished",
}
"""The verdict of a reply cut inside its reasoning or its final code block (never judged)."""


@dataclass
class PendingSample:
    """One generated (or given) sample waiting for the verdicts of its budgets."""

    problem: Problem
    index: int
    views: list[dict[str, Any]]
    """{"max_tokens", "code", "tokens", "finish_reason", "key", "unfinished"} per budget still
    to record ("unfinished": why the reply is unfinished, "" when it is not)."""
    waiting: int = 0


@dataclass
class _Call:
    kind: str  # "generate" | "judge" (programs) | "score" (replies of kinds not run)
    actor: str
    started: float
    payload: Any


@dataclass
class DriverStats:
    generated: int = 0
    """Samples generated in this session."""
    tokens: int = 0
    """Response tokens generated (at the largest budget)."""
    judged: int = 0
    """Programs sent to executors."""
    reused: int = 0
    """Budget records that took the verdict of an identical program (judged before or in
    flight): records = judged + reused + records without code."""
    generate_calls: int = 0
    judge_calls: int = 0
    first_sample_s: float | None = None
    policy_versions: set = field(default_factory=set)


class Driver:
    """One evaluation's loop; `on_sample(records)` gets each finished sample's records."""

    def __init__(
        self,
        settings: EvalSettings,
        generators: Sequence[tuple[str, Any]],
        executors: Sequence[tuple[str, Any]],
        on_sample: Callable[[list], None],
        progress: Callable[[dict], None] | None,
        total: int,
        cache: dict | None = None,
        judge_batch: int = 8,
    ):
        self.s = settings
        self.gens = list(generators)
        self.execs = list(executors)
        self.on_sample = on_sample
        self.progress = progress
        self.total = total
        self.cache: dict = cache if cache is not None else {}
        self.judge_batch = judge_batch
        self.stats = DriverStats()
        self.done = 0
        self.passed = 0
        self._inflight: dict[Any, _Call] = {}
        self._load = {name: 0 for name, _ in self.gens + self.execs}
        self._queue: deque = deque()  # program keys to judge
        self._replies: deque = deque()  # reply keys to score (kinds the sandbox does not run)
        self._queued: set = set()
        self._waiting: dict[Any, list[PendingSample]] = {}
        self._uid = 0
        self._start = time.monotonic()
        self._last_progress = 0.0
        self._last_done = -1

    # ------------------------------------------------------------ the loop

    def run(
        self,
        todos: Sequence[Todo],
        prompts: Callable[[Problem], str] | None,
        given: Sequence[PendingSample] = (),
        judge: bool = True,
    ) -> list:
        """Generate `todos` (or take `given` samples), judge, record. judge=False: generate only
        and return [(problem_id, sample_index, sample dict)] (the benchmark's generate-only)."""
        import ray

        self._judge = judge
        self._collected = []
        for sample in given:
            self._arrive(sample)
        cursor = 0
        parallel = max(1, len(self.gens) * self.s.calls_in_flight)
        while True:
            for name, handle in self.gens:
                while cursor < len(todos) and self._load[name] < self.s.calls_in_flight:
                    end = next_chunk(todos, cursor, self.s.sequences_per_call, parallel)
                    self._send_generate(name, handle, todos[cursor:end], prompts)
                    cursor = end
            self._send_judging()
            if not self._inflight:
                left = len(self._queue) + len(self._replies)
                if cursor >= len(todos) and not left:
                    break
                if cursor >= len(todos):
                    raise EvalError(f"{left} programs or replies to judge but no executor")
            ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=0.25)
            if ready:
                ready, _ = ray.wait(
                    list(self._inflight), num_returns=len(self._inflight), timeout=0
                )
            for ref in ready:
                self._finish(ref, self._inflight.pop(ref))
            self._check_deadlines()
            self._report()
        if self._waiting:
            raise EvalError(f"{len(self._waiting)} programs never judged (internal error)")
        self._report(force=True)
        return self._collected

    # ------------------------------------------------------------ sending

    def _send_generate(self, name, handle, todos: Sequence[Todo], prompts) -> None:
        ns = [len(t.sample_indices) for t in todos]
        if self.s.max_turns > 1:  # trajectories: one budget, the per-turn cap
            ref = handle.sample_eval_turns.remote(
                [t.problem for t in todos],
                ns,
                self.s.temperature,
                self.s.top_p,
                self.s.budgets[-1],
                self.s.max_turns,
            )
        else:
            texts = [prompts(t.problem) for t in todos]
            ref = handle.sample_eval.remote(
                texts, ns, self.s.temperature, self.s.top_p, list(self.s.budgets)
            )
        self._inflight[ref] = _Call("generate", name, time.monotonic(), list(todos))
        self._load[name] += 1
        self.stats.generate_calls += 1

    def _send_judging(self) -> None:
        """Programs to `judge_samples`, replies to `score_replies`, on the least loaded
        executors, as long as they take calls."""
        for kind, keys in (("judge", self._queue), ("score", self._replies)):
            while keys:
                name, handle = min(self.execs, key=lambda e: self._load[e[0]], default=(None, None))
                if name is None or self._load[name] >= self.s.judge_calls_in_flight:
                    return
                batch = [keys.popleft() for _ in range(min(self.judge_batch, len(keys)))]
                method = handle.judge_samples if kind == "judge" else handle.score_replies
                ref = method.remote([(k[0], k[1]) for k in batch])
                self._inflight[ref] = _Call(kind, name, time.monotonic(), batch)
                self._load[name] += 1
                self.stats.judge_calls += 1
                self.stats.judged += len(batch)

    # ------------------------------------------------------------ receiving

    def _finish(self, ref, call: _Call) -> None:
        import ray

        self._load[call.actor] -= 1
        try:
            result = ray.get(ref, timeout=60)
        except Exception as err:  # named and re-raised with the remedy
            raise EvalError(_actor_failure(call, err)) from err
        if call.kind != "generate":
            for key, verdict in zip(call.payload, result, strict=True):
                self._verdict(key, verdict)
            return
        self.stats.policy_versions.add(result.get("version"))
        for todo, samples in zip(call.payload, result["samples"], strict=True):
            for index, sample in zip(todo.sample_indices, samples, strict=True):
                self.stats.generated += 1
                self.stats.tokens += sample["tokens"]
                if not self._judge:
                    self._collected.append((todo.problem.id, index, sample))
                    self._count_done(passed=False)
                    continue
                views = [
                    _view(v, self.s.reasoning, todo.problem)
                    for v in sample["views"]
                    if v["max_tokens"] in todo.budgets[index]
                ]
                self._arrive(PendingSample(todo.problem, index, views))

    def _arrive(self, sample: PendingSample) -> None:
        if self.stats.first_sample_s is None:
            self.stats.first_sample_s = time.monotonic() - self._start
        for view in sample.views:
            if view.get("unfinished"):
                view["verdict"] = {**UNFINISHED, "message": f"unfinished: {view['unfinished']}"}
                continue
            if view["code"] is None:
                view["verdict"] = NO_CODE
                continue
            key = (sample.problem.id, view["code"])
            if not self.s.reuse_verdicts:
                self._uid += 1
                key = (*key, self._uid)
            view["key"] = key
            if key in self.cache:
                view["verdict"] = self.cache[key]
                self.stats.reused += 1
                continue
            sample.waiting += 1
            self._waiting.setdefault(key, []).append(sample)
            if key in self._queued:
                self.stats.reused += 1  # the same program is already on its way to a judge
            else:
                self._queued.add(key)
                program = sample.problem.kind in JUDGED_KINDS
                (self._queue if program else self._replies).append(key)
        if sample.waiting == 0:
            self._record(sample)

    def _verdict(self, key, verdict: dict) -> None:
        self.cache[key] = verdict
        self._queued.discard(key)
        for sample in self._waiting.pop(key, []):
            for view in sample.views:
                if view.get("key") == key and "verdict" not in view:
                    view["verdict"] = verdict
            sample.waiting -= 1
            if sample.waiting == 0:
                self._record(sample)

    def _record(self, sample: PendingSample) -> None:
        records = [
            SampleRecord(
                problem_id=sample.problem.id,
                sample_index=sample.index,
                max_tokens=v["max_tokens"],
                verdict=v["verdict"]["verdict"],
                passed=bool(v["verdict"]["passed"]),
                first_failed=v["verdict"]["first_failed"],
                code=v["code"],
                tokens=v["tokens"],
                finish_reason=v["finish_reason"],
                tests_passed=int(v["verdict"]["tests_passed"]),
                tests_total=len(sample.problem.tests),
                message=str(v["verdict"].get("message", ""))[:200],
                turn=v.get("turn"),
            )
            for v in sample.views
        ]
        self.on_sample(records)
        self._count_done(passed=bool(records) and records[-1].passed)

    def _count_done(self, passed: bool) -> None:
        self.done += 1
        self.passed += passed

    # ------------------------------------------------------------ watching

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for call in self._inflight.values():
            if now - call.started > self.s.call_timeout_s:
                what = _describe(call)
                raise EvalError(
                    f"{call.actor} has not answered a call ({what}) in {self.s.call_timeout_s:.0f}"
                    " s: it is hung or this machine is far too slow for the settings. See its "
                    "log (logs/<actor>.log in the output folder), lower --max-tokens or --samples,"
                    " or raise the call timeout; then rerun with --resume (finished samples are"
                    " kept)"
                )

    def _report(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.progress is None or (
            not force and now - self._last_progress < self.s.progress_every_s
        ):
            return
        self._last_progress = now
        if force and self._last_done == self.done:
            return
        self._last_done = self.done
        self.progress(
            {
                "done": self.done,
                "total": self.total,
                "elapsed_s": now - self._start,
                "generated": self.stats.generated,
                "judged": self.stats.judged,
                "passed": self.passed,
                "label": self.s.label,
            }
        )


def _view(v: dict, reasoning: str, problem: Problem) -> dict:
    """One budget's view of a generated sample: its extracted program (`code`), or for a kind
    the sandbox does not run its whole reply (scored by the reward function, never unfinished:
    the reward function reads the reply as training's does)."""

    turn = {"turn": v["turn"]} if "turn" in v else {}  # a --max-turns sample's turn
    if problem.kind not in JUDGED_KINDS:
        return {
            "max_tokens": v["max_tokens"],
            "code": v["text"],
            "tokens": v["tokens"],
            "finish_reason": v["finish_reason"],
            "unfinished": "",
            **turn,
        }
    found = extract(v["text"], reasoning, v["finish_reason"] == "length", problem.language)
    return {
        "max_tokens": v["max_tokens"],
        "code": found.code,
        "tokens": v["tokens"],
        "finish_reason": v["finish_reason"],
        "unfinished": found.reason if found.status == "unfinished" else "",
        **turn,
    }


def _describe(call: _Call) -> str:
    if call.kind == "generate":
        ids = [t.problem.id for t in call.payload]
        return f"generate {len(ids)} prompts, e.g. {ids[0]!r}"
    what = "programs" if call.kind == "judge" else "replies"
    return f"judge {len(call.payload)} {what} of e.g. problem {call.payload[0][0]!r}"


def _actor_failure(call: _Call, err: BaseException) -> str:
    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    cause = lines[-1] if lines else type(err).__name__
    remedy = (
        "a prompt + --max-tokens longer than the model allows, or the engine out of memory: "
        "lower --max-tokens or raise generator.max_prompt_tokens / kv_cache_gib"
        if call.kind == "generate"
        else "a sandbox that cannot start (try `microcoder judge` on one solution)"
    )
    return (
        f"{call.actor} failed on a call ({_describe(call)}): {cause}. Likely {remedy}; see "
        "logs/<actor>.log in the output folder. Finished samples are kept: fix it and rerun "
        "with --resume"
    )

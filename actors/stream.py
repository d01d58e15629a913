"""Continuous generation: groups are admitted as capacity frees and handed in as they finish.

Two halves on two threads (docs: notes/issue-17-design.md §3-4):

- `sample_group` runs on the engine's event-loop thread (actors/async_engine.py `AsyncEngine`):
  one `llm.generate` per group with n=G and FINAL_ONLY, so it returns once, when all G
  responses finished, with every completion's `weight_versions` spans (vLLM labels each output
  token with the engine's weight version; the generator sets the label to str(version)).
- `streaming_loop` runs on the actor's control thread, the only user of the BufferClient and of
  the weight update: it leases prompts while fewer than `capacity` groups are in flight, submits
  one `sample_group` task each, and puts every group the tick after it finishes. Finished
  tasks reach it through a thread-safe queue (the task's done-callback runs on the loop thread).
  Admission control stays the buffer's: the loop only caps its own in-flight count.

There are no waves: a short group is handed in while a longer one that started earlier is still
being sampled, and the engine never idles while one long response finishes.
"""

from __future__ import annotations

import concurrent.futures
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from microcoder.actors.rollout import response_of
from microcoder.actors.timing import PoolTimer
from microcoder.buffer.groups import Group
from microcoder.buffer.messages import PromptAssignment

_LEASE_RETRY_S = 0.1
"""While groups are in flight and the buffer gave no prompt, ask again at most this often."""
_TICK_S = 0.05
"""How long the loop waits for a finished group before it looks at leases and weights again."""


@dataclass
class StreamStats:
    """What one `streaming_loop` run did."""

    groups: int = 0
    """Groups handed in to the buffer."""
    tokens: int = 0
    """Response tokens of those groups."""
    failed: int = 0
    """Groups whose task raised (given to on_error)."""
    leased: int = 0
    """Prompts leased."""
    busy_s: float = 0.0
    """Seconds with at least one group in flight (submitted, not yet finished)."""
    wall_s: float = 0.0
    """Seconds the loop ran."""
    inflight: int = 0
    """Groups in flight now (at the end: those cancelled by stop)."""
    max_inflight: int = 0
    """The most groups in flight at once."""

    @property
    def busy_fraction(self) -> float:
        """busy_s / wall_s: the share of the run the engine had work."""
        return self.busy_s / self.wall_s if self.wall_s > 0 else 0.0


def _span_versions(completion) -> tuple[int, int] | None:
    """(first, last) version from a completion's weight_versions spans; None when there are no
    spans (no tokens sampled, or a vLLM without them) or a label is not an int."""
    spans = getattr(completion, "weight_versions", None)
    if not spans:
        return None
    try:
        return int(spans[0].version), int(spans[-1].version)
    except (TypeError, ValueError):
        return None


async def sample_group(
    llm,
    assignment: PromptAssignment,
    prompt_ids: list[int],
    params,
    admitted_version: int,
    current_version: Callable[[], int],
    owner: str,
    cache_salt: str | None = None,
) -> Group:
    """One `llm.generate(..., n=G, output_kind=FINAL_ONLY)` (`llm` an AsyncLLM, run on its loop;
    `cache_salt` the engine's `AsyncEngine.cache_salt` when the group was submitted).
    Responses carry policy_version = first span's version (the oldest) and last_policy_version =
    last span's version; fallback when spans are missing: admitted_version /
    current_version() at completion (both conservative for staleness)."""
    final_only = type(params.output_kind).FINAL_ONLY  # vLLM's RequestOutputKind, via params
    if params.output_kind is not final_only:
        params = params.clone()
        params.output_kind = final_only
    request_id = f"{owner}-g{assignment.group_id}-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    final = None
    prompt = {"prompt_token_ids": prompt_ids, "cache_salt": cache_salt}
    async for out in llm.generate(prompt, params, request_id):
        final = out
    gen_s = time.perf_counter() - t0
    if final is None:
        raise RuntimeError(f"vLLM returned no output for group {assignment.group_id}")
    responses = []
    for c in final.outputs:
        first, last = _span_versions(c) or (admitted_version, current_version())
        responses.append(
            response_of(
                c,
                temperature=params.temperature,
                policy_version=first,
                gen_time_s=gen_s,
                last_policy_version=last,
            )
        )
    return Group(
        group_id=assignment.group_id,
        problem_id=assignment.problem_id,
        prompt=assignment.prompt,
        prompt_ids=np.asarray(prompt_ids, np.int32),
        responses=responses,
        generator=owner,
    )


class _InFlight:
    """The loop's groups in flight: futures by group id, finished ones through a queue, and the
    busy-time integral (time with at least one group in flight)."""

    def __init__(self) -> None:
        self.futures: dict[int, concurrent.futures.Future] = {}
        self.finished: queue.Queue = queue.Queue()
        self.busy_s = 0.0
        self._busy_since: float | None = None

    def add(self, a: PromptAssignment, future: concurrent.futures.Future) -> None:
        if not self.futures:
            self._busy_since = time.monotonic()
        self.futures[a.group_id] = future
        future.add_done_callback(lambda f: self.finished.put((a, f, time.monotonic())))

    def take(self, timeout: float) -> list[tuple[PromptAssignment, concurrent.futures.Future]]:
        """Finished tasks (waits up to `timeout` for the first)."""
        out = []
        try:
            item = self.finished.get(timeout=timeout) if timeout > 0 else self.finished.get_nowait()
            while True:
                a, f, t_done = item
                if self.futures.pop(a.group_id, None) is not None:
                    out.append((a, f))
                    if not self.futures and self._busy_since is not None:
                        self.busy_s += t_done - self._busy_since
                        self._busy_since = None
                item = self.finished.get_nowait()
        except queue.Empty:
            pass
        return out

    def cancel_all(self) -> int:
        n = len(self.futures)
        for f in self.futures.values():
            f.cancel()  # cancels the task on the loop: vLLM aborts its request
        if self._busy_since is not None:
            self.busy_s += time.monotonic() - self._busy_since
            self._busy_since = None
        self.futures.clear()
        return n


def _engine_dead(err: BaseException) -> bool:
    return type(err).__name__ == "EngineDeadError"


def streaming_loop(
    client,
    engine,
    *,
    capacity: int,
    params_for: Callable[[PromptAssignment], object],
    prompt_ids: Callable[[str], list[int]],
    version: Callable[[], int],
    maybe_update: Callable[[], object],
    timer: PoolTimer,
    stop: threading.Event,
    on_groups: Callable[[list[Group]], None] | None = None,
    on_error: Callable[[PromptAssignment, BaseException], None] | None = None,
    max_groups: int | None = None,
    owner: str = "generator",
    after_lease: Callable[[], object] | None = None,
) -> StreamStats:
    """The generator's loop, run on the actor's control thread (the only user of `client`, a
    BufferClient, and of `maybe_update`); `engine` an AsyncEngine (`submit`, `llm`). Each tick:
    hand finished groups to the buffer (`client.put_unscored`) the moment they finish, then
    `on_groups(groups)`; if fewer than `capacity` groups are in flight, lease up to the free
    count (`client.get_prompts(free, wait_s=small)`) and submit one `sample_group` task per
    assignment (`params_for(a)` its SamplingParams, `prompt_ids(a.prompt)` its ids, `version()`
    the version at admission); call `maybe_update()` (the in-flight weight update; it
    pauses/loads/resumes the engine itself) once per tick, and `after_lease()` (default:
    `maybe_update`; the Generator's skips its poll throttle there) right after a lease that
    returned prompts, before their tasks are submitted (so new groups start on the newest
    weights: the lease may have waited while the learner stepped). Ends when `stop` is set, the buffer says done
    (after the in-flight groups finish and are put), or after `max_groups` groups (leased and
    finished). A group whose task raises is given to `on_error` (re-raised without one; an
    EngineDeadError is always re-raised: only a restart helps). On stop, in-flight tasks are
    cancelled (vLLM aborts their requests) and their leases are left to the caller's
    `client.release()`."""
    stats, flight = StreamStats(), _InFlight()
    t_start, source_done, next_lease = time.monotonic(), False, 0.0
    try:
        while not stop.is_set():
            wait = _TICK_S if flight.futures else 0.0
            with timer.busy() if flight.futures else timer.idle():
                finished = flight.take(wait)
            _hand_in(client, finished, stats, timer, on_groups, on_error)
            if max_groups is not None and stats.leased >= max_groups and not flight.futures:
                break
            if source_done and not flight.futures:
                break
            free = capacity - len(flight.futures)
            if max_groups is not None:
                free = min(free, max_groups - stats.leased)
            if free > 0 and not source_done and time.monotonic() >= next_lease:
                idle = not flight.futures
                with timer.idle() if idle else timer.io():
                    reply = client.get_prompts(free, wait_s=0.5 if idle else 0.0)
                source_done = reply.done
                if reply.assignments:
                    # Update after the lease, before sampling (as the wave loop synced): a lease
                    # may wait while the learner steps, and new groups must start on the newest
                    # weights, else admission control's staleness budget is overrun.
                    (after_lease or maybe_update)()
                    _submit(
                        engine, flight, reply.assignments, params_for, prompt_ids, version, owner
                    )
                    stats.leased += len(reply.assignments)
                    stats.max_inflight = max(stats.max_inflight, len(flight.futures))
                    continue
                if not idle:
                    next_lease = time.monotonic() + max(_LEASE_RETRY_S, reply.retry_after_s)
            maybe_update()
    finally:
        stats.inflight = flight.cancel_all()
        stats.busy_s = flight.busy_s
        stats.wall_s = time.monotonic() - t_start
    return stats


def _submit(engine, flight: _InFlight, assignments, params_for, prompt_ids, version, owner) -> None:
    """One sample_group task per assignment on the engine's loop."""
    for a in assignments:
        v = version()
        ids, salt = prompt_ids(a.prompt), engine.cache_salt
        coro = sample_group(engine.llm, a, ids, params_for(a), v, version, owner, salt)
        flight.add(a, engine.submit(coro))


def _hand_in(client, finished, stats: StreamStats, timer: PoolTimer, on_groups, on_error) -> None:
    """Put the finished groups (one request), give the failed ones to on_error."""
    groups = []
    for a, f in finished:
        if f.cancelled():
            continue
        err = f.exception()
        if err is None:
            groups.append(f.result())
            continue
        stats.failed += 1
        if _engine_dead(err) or on_error is None:
            raise err
        try:
            on_error(a, err)
        except Exception as lost:  # e.g. the lease expired meanwhile: say so, go on
            print(f"{a.group_id}: on_error failed: {lost}", file=sys.stderr)
    if groups:
        with timer.io():
            client.put_unscored(groups)
        stats.groups += len(groups)
        stats.tokens += sum(g.n_tokens for g in groups)
        if on_groups is not None:
            on_groups(groups)

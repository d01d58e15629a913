"""Continuous generation: groups are admitted as capacity frees and handed in as they finish.

Two halves on two threads (docs: notes/issue-17-design.md §3-4):

- `sample_group` runs on the engine's event-loop thread (actors/engines/async_llm.py `AsyncEngine`):
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

A weight update that fails (rank 0 did not answer in time, the channel broke, the load raised)
costs the groups in flight nothing: the loop logs and counts it (`StreamStats.update_failures`,
`on_update_error`) and goes on sampling on the weights it has; the next poll tries again. After
`max_failed_updates` failures in a row it gives up on the weights, not on the work: it leases
no more prompts, hands in every group in flight as it finishes, and only then raises
`WeightUpdatesFailed` (the last failure's text names the peer), so the pool supervisor restarts
the generator's loop, which opens a new channel. Two failures still end the loop at once, its
groups in flight cancelled and their leases handed back to the buffer by the supervisor (counted
in its "returned its leases" line): an engine that died (EngineDeadError), and a load that failed
after it began (`WeightsMixedError`: the worker loads bucket by bucket, so the engine may hold
part of the new weights, and no token may be sampled on them).
"""

from __future__ import annotations

import concurrent.futures
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass

from microcoder.actors.sampling import (
    completion_versions,
    final_only,
    generate_final,
    group_of,
    response_of,
)
from microcoder.actors.timing import PoolTimer
from microcoder.protocol import Group, PromptAssignment

_LEASE_RETRY_S = 0.1
"""While groups are in flight and the buffer gave no prompt, ask again at most this often."""
_TICK_S = 0.05
"""How long the loop waits for a finished group before it looks at leases and weights again."""
_IDLE_LEASE_WAIT_S = 0.5
"""With nothing in flight, how long a lease waits (a long poll the buffer holds) for a prompt."""


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
    update_failures: int = 0
    """Weight updates (`maybe_update` / `after_lease` calls) that raised; the loop went on."""
    ticks: int = 0
    """Turns of the loop (each hands in, maybe leases, maybe updates)."""
    lease_calls: int = 0
    """Calls to `client.get_prompts`, with or without prompts in the reply."""


async def sample_group(
    llm,
    assignment: PromptAssignment,
    prompt_ids: list[int],
    params,
    admitted_version: int,
    current_version: Callable[[], int],
    owner: str,
    cache_salt: str | None = None,
    current_salt: Callable[[], str | None] | None = None,
    adapters=None,
) -> Group:
    """One `llm.generate(..., n=G, output_kind=FINAL_ONLY)` (`llm` an AsyncLLM, run on its loop;
    `cache_salt` the engine's `AsyncEngine.cache_salt` when the group was submitted,
    `current_salt()` the engine's salt now). Responses carry policy_version = first span's
    version (the oldest) and last_policy_version = last span's version; fallback when spans are
    missing: admitted_version / current_version() at completion (both conservative for staleness).

    The KV floor: when the salt changed while the group was in flight (an update kept the KV:
    "reuse"), policy_version is at most `admitted_version`: a request first sampled after the
    update may read old-weights prompt KV (blocks cached under its old salt, or its own prefill
    cut by the pause; notes/issue-33-h38.md). Under "recompute" the salt never changes.

    Under `learner.lora` (`adapters`: the engine's actors/engines/adapters.py `AdapterSet`) the
    group runs on the newest adapter version from start to end (`lora_request`), whatever loads
    meanwhile: every response is tagged with that version (first and last), and no floor is
    needed (an adapter sync neither pauses the engine nor changes the salt). A group submitted
    before the first adapter runs on the base model, version 0's policy, to its end: tagged 0."""
    params = final_only(params)
    request_id = f"{owner}-g{assignment.group_id}-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    prompt = {"prompt_token_ids": prompt_ids, "cache_salt": cache_salt}
    lease = None if adapters is None else adapters.acquire()
    try:
        final = await generate_final(llm, prompt, params, request_id, lease)
    finally:
        if lease is not None:
            adapters.release(lease)
    gen_s = time.perf_counter() - t0
    responses = []
    kv_kept = current_salt is not None and current_salt() != cache_salt
    for c in final.outputs:
        first, last = completion_versions(
            c,
            admitted_version=admitted_version,
            current_version=current_version(),
            kv_kept=kv_kept,
            lease=lease,
            adapters=adapters,
        )
        responses.append(
            response_of(
                c,
                temperature=params.temperature,
                policy_version=first,
                gen_time_s=gen_s,
                last_policy_version=last,
            )
        )
    return group_of(assignment, prompt_ids, responses, owner)


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


def engine_dead(err: BaseException) -> bool:
    """vLLM's engine process is gone: nothing but a restart helps."""
    return type(err).__name__ == "EngineDeadError"


def caused_by(err: BaseException | None, test: Callable[[BaseException], bool]) -> bool:
    """Whether `test` holds for `err` or for an exception it was raised from (or during)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if test(err):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


_FATAL_UPDATE_ERRORS = ("EngineDeadError", "WeightsMixedError")
"""A weight update that failed with one of these (or from one) ends the loop at once: the engine
is gone, or its weights may be part new, part old (actors/weights/publisher.py `WeightsMixedError`)."""


def _fatal_update_error(err: BaseException | None) -> bool:
    """Whether `err` or an exception it was raised from (or during) is one no retry can mend."""
    return caused_by(err, lambda e: type(e).__name__ in _FATAL_UPDATE_ERRORS)


MAX_FAILED_UPDATES = 3
"""`streaming_loop`'s default for `max_failed_updates` (the generator passes
`generator.max_failed_syncs`)."""


class WeightUpdatesFailed(RuntimeError):
    """`max_failed_updates` weight updates in a row failed; the loop handed in its groups in
    flight and ended (the last failure is the `__cause__`)."""


class _Updates:
    """The loop's weight updates: a failure is counted, reported and retried at the next poll
    instead of ending the loop; `gave_up` after `limit` failures in a row. A call that returns
    a truthy value (new weights loaded) ends a run of failures."""

    def __init__(self, maybe_update, after_lease, limit: int, on_error, owner: str, stats):
        self.maybe_update = maybe_update
        self.after_lease = after_lease or maybe_update
        self.limit = max(1, limit)
        self.on_error = on_error
        self.owner = owner
        self.stats = stats
        self.in_row = 0
        self.last: BaseException | None = None

    @property
    def gave_up(self) -> bool:
        return self.in_row >= self.limit

    def __call__(self, leased: bool = False) -> None:
        # Right after a lease the update is unthrottled, unless the last one failed: then it
        # waits for the next poll like any retry (a failing peer is not asked on every lease).
        update = self.after_lease if leased and not self.in_row else self.maybe_update
        try:
            loaded = update()
        except Exception as err:
            if _fatal_update_error(err):
                raise
            self.in_row += 1
            self.stats.update_failures += 1
            self.last = err
            if self.on_error is not None:
                self.on_error(err, self.in_row)
            else:
                print(
                    f"{self.owner}: weight update failed ({self.in_row} in a row; the groups in "
                    f"flight go on): {type(err).__name__}: {err}",
                    file=sys.stderr,
                )
            return
        if loaded:
            self.in_row = 0

    def error(self, handed_in: int) -> WeightUpdatesFailed:
        err = self.last
        return WeightUpdatesFailed(
            f"{self.owner}: {self.in_row} weight updates in a row failed, the last: "
            f"{type(err).__name__}: {str(err).strip()[:600]}. It leased no more prompts, handed in "
            f"the {handed_in} group(s) it had in flight and stopped its loop, so that it is "
            "restarted with a new weight channel. Check the peer named above (learner rank 0: "
            "RUN_DIR/logs/learner-0.log): if it is only slow, raise learner.sync_timeout_s; "
            "generator.max_failed_syncs sets how many failures in a row end the loop"
        )


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
    max_failed_updates: int = MAX_FAILED_UPDATES,
    on_update_error: Callable[[BaseException, int], None] | None = None,
    hold_leases: Callable[[], bool] | None = None,
    group_task: Callable[[PromptAssignment, int], Coroutine] | None = None,
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
    weights: the lease may have waited while the learner stepped), unless the reply's `version`
    (the learner's newest, as announced to the buffer) is not newer than `version()`: then
    there is nothing to ask. Idle, a lease is the buffer's long poll (`_Leases`). `maybe_update`
    returns a truthy value when it loaded new weights. Ends when `stop` is set, the buffer says
    done (after the in-flight groups finish and are put), or after `max_groups` groups (leased
    and finished). A group whose task raises is given to `on_error` (re-raised without one; an
    EngineDeadError is always re-raised: only a restart helps). On stop, in-flight tasks are
    cancelled (vLLM aborts their requests) and their leases are left to the caller's
    `client.release()`.

    A weight update that raises does not end the loop (`_Updates`, the module docstring): given to
    `on_update_error(err, failures_in_a_row)`, retried; after `max_failed_updates` in a row the
    loop raises `WeightUpdatesFailed` once the groups in flight are handed in.

    `hold_leases()` true: lease nothing this tick (the Generator's: a weight send asked of rank 0
    and not yet ready, actors/weights/pull.py; new groups would start on weights about to be
    replaced, overrunning the staleness budget); the groups in flight go on and are handed in.

    `group_task(assignment, version)` (multi-turn environments: actors/trajectory.py) makes the
    coroutine of one group instead of `sample_group` (None: `sample_group`, one request of n=G)."""
    stats = StreamStats()
    flight = _InFlight()
    updates = _Updates(maybe_update, after_lease, max_failed_updates, on_update_error, owner, stats)
    leases = _Leases(
        client, flight, stats, timer, stop, updates, version, capacity, max_groups, hold_leases
    )
    t_start = time.monotonic()
    groups_at_give_up = 0  # groups handed in before it gave up
    try:
        while not stop.is_set():
            stats.ticks += 1
            # 1. Hand in what finished (waiting up to a tick while groups are in flight).
            with timer.busy() if flight.futures else timer.idle():
                finished = flight.take(_TICK_S if flight.futures else 0.0)
            _hand_in(client, finished, stats, timer, on_groups, on_error)
            # 2. The end: max_groups leased, or the buffer done, and nothing left in flight.
            if not flight.futures and (leases.all_leased() or leases.source_done):
                break
            # 3. Gave up on the weights: lease nothing more; raise once the groups are in.
            if updates.gave_up:
                if not flight.futures:
                    raise updates.error(stats.groups - groups_at_give_up) from updates.last
                continue
            groups_at_give_up = stats.groups
            # 4. Lease up to the free capacity, submit a task per prompt, turn again at once.
            if assignments := leases.tick():
                if group_task is None:
                    _submit(engine, flight, assignments, params_for, prompt_ids, version, owner)
                else:
                    for a in assignments:
                        flight.add(a, engine.submit(group_task(a, version())))
                stats.max_inflight = max(stats.max_inflight, len(flight.futures))
                continue
            # 5. This tick's weight update (a failure is counted and retried, not raised).
            updates()
    finally:
        stats.inflight = flight.cancel_all()
        stats.busy_s = flight.busy_s
        stats.wall_s = time.monotonic() - t_start
    return stats


class _Leases:
    """`streaming_loop`'s leasing: when to ask the buffer for prompts, and the weight update a
    reply with prompts calls for. Idle (nothing in flight), the lease waits for a prompt as the
    buffer's long poll; with groups in flight a refused lease is asked again after
    `_LEASE_RETRY_S`: the loop never turns without waiting on something."""

    def __init__(
        self, client, flight, stats, timer, stop, updates, version, capacity, max_groups, hold
    ):
        self.client = client
        self.flight = flight
        self.stats = stats
        self.timer = timer
        self.stop = stop
        self.updates = updates
        self.version = version
        self.capacity = capacity
        self.max_groups = max_groups
        self.hold = hold
        self.source_done = False  # the buffer said done: no prompt will come
        self.next_lease = 0.0  # with groups in flight, no lease before this (monotonic)

    def all_leased(self) -> bool:
        return self.max_groups is not None and self.stats.leased >= self.max_groups

    def tick(self) -> list[PromptAssignment]:
        """This tick's lease, if one is due: the prompts leased (none: nothing leased)."""
        free = self.capacity - len(self.flight.futures)
        if self.max_groups is not None:
            free = min(free, self.max_groups - self.stats.leased)
        held = self.hold is not None and self.hold()
        idle = not self.flight.futures
        # Idle, the lease is a long poll (the buffer holds it until it has a prompt or
        # admission opens): never a retry delay then, which would leave the loop turning
        # with nothing to wait on.
        if (
            free > 0
            and not self.source_done
            and not held
            and (idle or time.monotonic() >= self.next_lease)
        ):
            return self._lease(free, idle)
        if held and idle:  # nothing to hand in: wait a tick, not spin
            with self.timer.idle():
                self.stop.wait(_TICK_S)
        return []

    def _lease(self, free: int, idle: bool) -> list[PromptAssignment]:
        """Ask for up to `free` prompts; with prompts, update the weights first if newer."""
        asked = time.monotonic()
        with self.timer.idle() if idle else self.timer.io():
            reply = self.client.get_prompts(free, wait_s=_IDLE_LEASE_WAIT_S if idle else 0.0)
        self.stats.lease_calls += 1
        self.source_done = reply.done
        if reply.assignments:
            # Update after the lease, before sampling (as the wave loop synced): a lease
            # may wait while the learner steps, and new groups must start on the newest
            # weights, else admission control's staleness budget is overrun. The reply
            # names the learner's newest version: when ours is that, nothing to ask.
            if getattr(reply, "version", -1) < 0 or reply.version > self.version():
                self.updates(leased=True)
            self.stats.leased += len(reply.assignments)
            return reply.assignments
        if not idle:  # the buffer's retry_after_s is its long poll: too long here
            self.next_lease = time.monotonic() + _LEASE_RETRY_S
        elif not reply.done and time.monotonic() - asked < _TICK_S:
            with self.timer.idle():  # a buffer that did not hold the poll: not a spin
                self.stop.wait(_TICK_S)
        return []


def _submit(engine, flight: _InFlight, assignments, params_for, prompt_ids, version, owner) -> None:
    """One sample_group task per assignment on the engine's loop."""
    for a in assignments:
        v = version()
        ids = prompt_ids(a.prompt)
        salt = engine.cache_salt
        coro = sample_group(
            engine.llm,
            a,
            ids,
            params_for(a),
            v,
            version,
            owner,
            salt,
            lambda: engine.cache_salt,
            getattr(engine, "adapters", None),
        )
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
        if engine_dead(err) or on_error is None:
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

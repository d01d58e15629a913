"""The executor's loop: unscored groups are judged as a stream, not in waves.

Each group is judged on a thread of its own (`judge([group])`; the Executor's judge submits the
group's responses through a channel of its JudgePool, sandbox/pool.py, so all groups share the
pool's workers and queue). A group is handed in the moment its last verdict is in, and new
groups are leased as soon as responses finish: no group waits for a slower one that was leased
with it, and the workers never idle while one long (TLE) program finishes.

How far ahead it leases. `slots` is the number of programs the judge runs at once (the pool's
workers). The loop leases again whenever fewer than `slots` + G responses are unjudged (leased,
not yet handed in), G being the largest group it has leased; it asks for enough groups to fill
that, ceil(deficit / G). So at most `slots` + 2G - 1 responses, about slots / G + 2 groups, are
leased at once: enough that a worker that frees up finds a program queued, few enough that the
groups it holds start within about one program's time. Before its first group it asks for one,
to learn G.

Leases are the buffer's, unchanged: a group is held from its lease until its scores (or its
failure) are handed in, and the buffer still returns it after `buffer.lease_timeout_s`. On stop
the loop leases nothing more, hands in the groups in flight as they finish, for at most
`drain_s` seconds; the groups still unjudged then, and those whose judge raised after stop
(its pool closed under it), stay leased, and the caller's `client.release()` returns them to
the unscored queue.
"""

from __future__ import annotations

import concurrent.futures
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from microcoder.actors.scoring import ScoringOutcome
from microcoder.actors.timing import PoolTimer

LEASE_RETRY_S = 0.1
"""While groups are in flight and the buffer had none to lease, ask again at most this often."""
TICK_S = 0.05
"""How long the loop waits for a finished group before it looks at leases again."""
DRAIN_S = 30.0
"""After stop, how long the loop waits for the groups in flight before it leaves them leased."""


@dataclass
class JudgeStats:
    """What one `judging_loop` run did."""

    leased: int = 0
    """Groups leased."""
    groups: int = 0
    """Groups handed in: scored or failed."""
    max_inflight_groups: int = 0
    """The most groups leased and not yet handed in at once."""
    max_inflight_responses: int = 0
    """The most responses leased and not yet handed in at once (the lease bound: at most
    slots + 2G - 1)."""
    ticks: int = 0
    """Turns of the loop (each hands in, maybe leases)."""
    left_leased: int = 0
    """Groups left leased for the caller's release(): still in flight when the loop ended (stop,
    after drain_s), or whose judge raised after stop."""


class _InFlight:
    """The groups being judged: their futures, and how many responses they hold."""

    def __init__(self, slots: int):
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=slots + 2, thread_name_prefix="judge-group"
        )
        self.futures: dict[concurrent.futures.Future, object] = {}
        self.responses = 0

    def start(self, judge: Callable, group) -> None:
        self.futures[self.pool.submit(judge, [group])] = group
        self.responses += len(group.responses)

    def take(self, timeout: float) -> list[tuple[object, concurrent.futures.Future]]:
        if not self.futures:
            return []
        done, _ = concurrent.futures.wait(
            self.futures, timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        out = [(self.futures.pop(f), f) for f in done]
        self.responses -= sum(len(g.responses) for g, _ in out)
        return out

    def close(self) -> int:
        left = len(self.futures)
        self.pool.shutdown(wait=False, cancel_futures=True)
        return left


def lease_count(slots: int, group_size: int, unjudged: int) -> int:
    """Groups to lease now: 1 before the first (G unknown), else enough to bring the unjudged
    responses to `slots` + G (0 when they are there already)."""
    if group_size <= 0:
        return 1
    return max(0, math.ceil((slots + group_size - unjudged) / group_size))


def judging_loop(
    client,
    judge: Callable[[list], ScoringOutcome],
    record: Callable[[ScoringOutcome], None],
    timer: PoolTimer,
    stop: threading.Event,
    *,
    slots: int,
    max_groups: int | None = None,
    drain_s: float = DRAIN_S,
) -> JudgeStats:
    """The executor's loop, on its control thread (the only user of `client`, a BufferClient).
    Leases unscored groups (`client.get_unscored`) while fewer than `slots` + G responses are
    unjudged (module doc), runs `judge([group])` (thread-safe; a ScoringOutcome, see
    actors/scoring.py) for each on a thread of its own, and as groups finish hands in their
    scores (`put_scored`) and failures (`fail_group`), then `record(outcome)`. A judge that
    raises fails that group (reason: the exception), counted; the loop goes on. Ends when `stop`
    is set (after the groups in flight are in, or `drain_s`) or after `max_groups` groups were
    leased and handed in. `Executor.run` runs it on the sandbox pool; `microcoder bench
    pipeline` (bench/pipeline/actors.py) with a sleep as `judge`."""
    stats = JudgeStats()
    flight = _InFlight(slots)
    group_size = 0
    next_lease = 0.0
    stop_at = None
    try:
        while True:
            stats.ticks += 1
            if stop.is_set() and stop_at is None:
                stop_at = time.monotonic() + drain_s
            leasing = stop_at is None and (max_groups is None or stats.leased < max_groups)
            if not leasing and (not flight.futures or time.monotonic() >= (stop_at or math.inf)):
                break
            with timer.busy() if flight.futures else timer.idle():
                finished = flight.take(TICK_S)
            if finished:
                _hand_in(client, finished, record, timer, stats, stopping=stop_at is not None)
            want = lease_count(slots, group_size, flight.responses) if leasing else 0
            if max_groups is not None:
                want = min(want, max_groups - stats.leased)
            idle = not flight.futures
            # Idle, the lease is a long poll the buffer holds: no retry delay, which would leave
            # the loop turning with nothing to wait on (take() returns at once with no futures).
            if want <= 0 or (not idle and time.monotonic() < next_lease):
                continue
            with timer.idle() if idle else timer.io():
                got = client.get_unscored(want, wait_s=0.5 if idle else 0.0)
            for g in got:
                group_size = max(group_size, len(g.responses))
                flight.start(judge, g)
            stats.leased += len(got)
            stats.max_inflight_groups = max(stats.max_inflight_groups, len(flight.futures))
            stats.max_inflight_responses = max(stats.max_inflight_responses, flight.responses)
            if not got and not idle:
                next_lease = time.monotonic() + LEASE_RETRY_S
    finally:
        stats.left_leased += flight.close()
    return stats


def _hand_in(client, finished, record, timer: PoolTimer, stats: JudgeStats, stopping: bool) -> None:
    """One put for every scored group that finished, a fail_group per failed one, then record.
    A judge that raised while `stopping` (most likely its pool was closed under it) leaves its
    group leased for the caller's release(): the group is judged again elsewhere."""
    out = ScoringOutcome()
    left = 0
    for group, future in finished:
        err = future.exception()
        if err is not None and stopping:
            left += 1
            continue
        if err is None:
            part = future.result()
            out.scored += part.scored
            out.failed += part.failed
            out.tests_run += part.tests_run
            out.reward_errors += part.reward_errors
        else:
            reason = f"the judge raised {type(err).__name__}: {err}"[:500]
            print(f"group {group.group_id}: {reason}", file=sys.stderr)
            out.failed.append((group.group_id, reason))
    with timer.io():
        if out.scored:
            client.put_scored(out.scored)
        for gid, reason in out.failed:
            client.fail_group(gid, reason)
    stats.groups += len(finished) - left
    stats.left_leased += left
    record(out)

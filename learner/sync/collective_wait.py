"""A collective's wait with a deadline on every backend (issue 33, fault 3).

gloo's `work.wait()` blocks at most the group's timeout and then raises. NCCL's does not: on a
CUDA tensor it only makes the current stream wait for the communicator's stream and returns at
once, and the host blocks later (a `.item()`, a copy) with no deadline; a peer that died leaves
the collective pending until NCCL's watchdog aborts the whole process, with no word of which peer
it was. So on NCCL `wait_work` polls `work.is_completed()` up to the deadline; past it, it aborts
the communicator (so the pending collective and the stream behind it are released) and raises
`WeightSyncError` naming the peers. Only torch is imported here (a vLLM worker imports it)."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_S = 0.002
"""The first interval between polls of an NCCL work; it doubles up to `MAX_POLL_S`, so a quick
collective is seen done within microseconds of it and a long one costs a few polls a second."""

MAX_POLL_S = 0.05


class CollectiveTimeout(RuntimeError):
    """A collective of the weight channel did not complete within its deadline."""


def wait_work(
    work,
    timeout_s: float,
    *,
    blocking: bool,
    what: str,
    abort: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Wait for `work` at most `timeout_s`.

    `blocking`: the backend's own `wait()` honours the group's timeout (gloo): call it as is.
    Otherwise (NCCL) poll `is_completed()`; then `wait()` (it raises the collective's own error
    if it failed). Past the deadline, `abort()` (the communicator's) runs and `CollectiveTimeout`
    names `what` (the peers, and the field to raise)."""
    if blocking:
        work.wait()
        return
    deadline = clock() + timeout_s
    pause = POLL_S
    while not work.is_completed():
        if clock() >= deadline:
            if abort is not None:
                try:
                    abort()
                except Exception:  # the timeout is the error to report, not the abort's
                    pass
            raise CollectiveTimeout(f"{what} did not complete within {timeout_s:.0f} s")
        sleep(pause)
        pause = min(pause * 2, MAX_POLL_S)
    work.wait()

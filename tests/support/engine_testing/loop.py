"""actors/generate_loop.py's `streaming_loop` driven by stand-ins, for the unit tests of the loop
(tests/actors/test_generate_loop_failed_updates.py, test_generate_loop_idle_cpu.py): an engine whose group
tasks are plain futures, and the loop's call with the arguments those tests do not vary."""

from __future__ import annotations

import concurrent.futures
import threading

from microcoder.actors.generate_loop import streaming_loop
from microcoder.actors.timing import PoolTimer


class FutureEngine:
    """What the loop uses of an AsyncEngine (`llm`, `cache_salt`, `submit`): each group task
    becomes a future, never sampled; `started(group_id, future)` decides when it finishes."""

    llm = None
    cache_salt = None

    def submit(self, coro) -> concurrent.futures.Future:
        group_id = coro.cr_frame.f_locals["assignment"].group_id
        coro.close()  # sample_group never runs
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.started(group_id, future)
        return future

    def started(self, group_id: int, future: concurrent.futures.Future) -> None:
        raise NotImplementedError


def run_loop(client, engine, **kw):
    """`streaming_loop(client, engine, ...)` with 3 groups in flight, prompts of three tokens, no
    sampling params, version 0, no weight update, a fresh timer and stop event; `kw` overrides."""
    args = dict(
        capacity=3,
        params_for=lambda a: None,
        prompt_ids=lambda text: [1, 2, 3],
        version=lambda: 0,
        maybe_update=lambda: None,
        timer=PoolTimer(),
        stop=threading.Event(),
    )
    return streaming_loop(client, engine, **(args | kw))

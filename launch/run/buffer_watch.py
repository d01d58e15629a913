"""Is the run's buffer alive? `BufferWatch`: the supervisor's look once a round
(launch/run/supervisor.py) and `Run.buffer_gone`'s (launch/run/cluster.py) when the main thread
saw an error first.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from microcoder import protocol as m
from microcoder.launch.run.pools import error_summary

if TYPE_CHECKING:  # cluster.py imports this module lazily: it must not import cluster.py back
    from microcoder.launch.run.cluster import Run


class BufferWatch:
    """Is the run's buffer alive? `check()`, once per supervisor round, asks the buffer actor
    (`ping_actor`: Ray answers at once when its process is gone) and the buffer server itself
    (`ping_server`: a request with a short deadline). Returns why the buffer is dead, or "" while
    it is not: dead = its actor died, or it has not answered for `dead_after_s` (the clients' own
    request timeout: by then every actor's request to it fails too). `for_run` builds it."""

    def __init__(self, ping_actor, ping_server, dead_after_s: float, clock=time.monotonic):
        self.ping_actor = ping_actor
        self.ping_server = ping_server
        self.dead_after_s = dead_after_s
        self.clock = clock
        self.failing_since: float | None = None
        """When the first of the failures going on now happened (None: the buffer answers)."""

    @classmethod
    def for_run(cls, run: Run, probe_s: float = 5.0) -> BufferWatch:
        """The run's buffer actor, asked through Ray, and its server, asked for its stats through
        the supervisor's own client (`run.release_client`: this thread's socket)."""
        import ray

        return cls(
            lambda: ray.get(run.buffer.get_address.remote(), timeout=probe_s),
            lambda: run.release_client.call(m.GetStats(), timeout_s=probe_s),
            run.cfg.buffer.request_timeout_s,
        )

    def check(self) -> str:
        from ray.exceptions import ActorDiedError

        try:
            self.ping_actor()
            self.ping_server()
        except ActorDiedError as err:
            return f"the buffer actor died ({error_summary(err)})"
        except Exception as err:
            now = self.clock()
            self.failing_since = self.failing_since if self.failing_since is not None else now
            if now - self.failing_since < self.dead_after_s:
                return ""
            return (
                f"the buffer has not answered for {now - self.failing_since:.0f} s "
                f"({type(err).__name__}: {str(err).splitlines()[0][:200]})"
            )
        self.failing_since = None
        return ""

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

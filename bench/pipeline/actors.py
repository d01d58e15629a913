"""Simulated pipeline actors for `microcoder bench pipeline`: a benchmark instrument, not product
code. They run the product's own loops against the real buffer (BufferClient -> the BufferHost
actor, with its admission control and staleness gate); only the work inside a wave is a
`time.sleep(cost)`:

- SimGenerator: `streaming_loop` of actors/generate_loop.py (up to `wave` groups in flight, a prompt
  leased as soon as a group finishes, each group handed in as it finishes, `maybe_update` every
  tick) on a simulated engine (bench/pipeline/sim_engine.py: serial, `per_group_s` per group,
  `group_size` tiny responses each, versions from the engine's label as vLLM reports them);
  its update polls the learner's newest version every `poll_s`, and right after a lease that
  returned prompts when the buffer's reply names a newer version than the engine's (before they
  are sampled, as the product loop orders it), and sets the engine's label.
  `sync_before_lease=True` also learns the version right before each lease (the order the
  wave loop had until issue 7; with streaming the label, not the lease, decides the version);
- SimExecutor: `judging_loop` of actors/judge_loop.py (lease unscored groups as judging frees
  up, judge each on a thread, hand in its scores as it finishes); its judge is serial (a lock)
  and sleeps `per_group_s` per group, so its throughput is exactly 1 / per_group_s groups/s,
  the cost model of the waves it replaces;
- SimLearner: get_batch(batch_size) at its version -> sleep `train_s` -> version + 1 ->
  announce_version (one optimizer step of actors/learner_rank.py + learner_group.py; a loop of
  three calls, so it is written out here rather than shared with the learner rank).

Costs are linear in groups, so a pool's throughput is exactly (replicas / per-batch cost) and the
ideal pipeline bound is well defined. Sleeping costs no CPU: the figures do not depend on how
busy the shared machine is, only on the pipeline's coordination overheads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from microcoder.actors.judge_loop import judging_loop
from microcoder.actors.scoring import ScoringOutcome
from microcoder.actors.timing import PoolTimer
from microcoder.bench.pipeline.sim_engine import SimEngine, SimParams
from microcoder.protocol import GroupScores, Score


class _Sim:
    """Control methods of a simulated actor; `timer` (a PoolTimer) starts with its loop."""

    def __init__(self) -> None:
        self.timer = PoolTimer()
        self._stop = threading.Event()
        self._cpu0 = time.process_time()

    def ready(self) -> bool:
        return True

    def start_clock(self) -> None:
        """The loop starts: its wall (the timer) and this process's CPU count from now."""

        self.timer = PoolTimer()
        self._cpu0 = time.process_time()

    def stop(self) -> None:
        self._stop.set()

    def summary(self) -> dict[str, float]:
        """Busy seconds (inside the simulated work), the wall seconds of the loop and the CPU
        seconds this actor's process used meanwhile (every thread: the loop, the engine's event
        loop, Ray's and ZeroMQ's; the simulated work itself is a sleep and costs none)."""
        s = self.timer.summary()
        return {
            "busy_s": s["busy_s"],
            "wall_s": s["wall_s"],
            "cpu_s": time.process_time() - self._cpu0,
        }


class SimGenerator(_Sim):
    def __init__(
        self,
        name: str,
        address: str,
        learner: Any,
        group_size: int,
        per_group_s: float,
        wave: int,
        response_tokens: int = 16,
        sync_before_lease: bool = False,
        poll_s: float = 0.1,
    ):
        from microcoder.buffer.client import BufferClient

        super().__init__()
        self.name = name
        self.learner = learner
        self.group_size = group_size
        self.per_group_s = per_group_s
        self.wave = wave
        self.response_tokens = response_tokens
        self.client = BufferClient(address, owner=name)
        self.sync_before_lease = sync_before_lease
        self.poll_s = poll_s
        self.version = 0
        self.groups = 0
        self.polls = 0
        """Calls to the learner's latest_version."""
        self._engine = None
        self._next_poll = 0.0

    def run(self) -> dict[str, Any]:
        from microcoder.actors.generate_loop import streaming_loop

        self.start_clock()
        self._engine = SimEngine(self.per_group_s, self.response_tokens)
        client = _SyncFirst(self.client, self._sync) if self.sync_before_lease else self.client
        params = SimParams(n=self.group_size)
        try:
            stats = streaming_loop(
                client,
                self._engine,
                capacity=self.wave,
                params_for=lambda a: params,
                prompt_ids=lambda text: [3] * 8,
                version=lambda: self.version,
                maybe_update=self._maybe_update,
                after_lease=self._sync,
                timer=self.timer,
                stop=self._stop,
                on_groups=self._count,
                owner=self.name,
            )
        finally:
            self._engine.shutdown()
        return {
            "name": self.name,
            "groups": self.groups,
            "ticks": stats.ticks,
            "leases": stats.lease_calls,
            "version_polls": self.polls,
            **self.summary(),
        }

    def _maybe_update(self) -> None:
        if time.monotonic() >= self._next_poll:
            self._sync()
            self._next_poll = time.monotonic() + self.poll_s

    def _sync(self) -> None:
        import ray

        self.polls += 1
        self.version = ray.get(self.learner.latest_version.remote())
        self._engine.set_version(self.version)

    def _count(self, groups: list) -> None:
        self.groups += len(groups)


class _SyncFirst:
    """A BufferClient whose lease first runs `sync` (the sync-before-lease order)."""

    def __init__(self, client, sync) -> None:
        self.client = client
        self.sync = sync

    def get_prompts(self, n: int, wait_s: float):
        self.sync()
        return self.client.get_prompts(n, wait_s=wait_s)

    def put_unscored(self, groups) -> None:
        self.client.put_unscored(groups)


class SimExecutor(_Sim):
    def __init__(self, name: str, address: str, per_group_s: float, slots: int = 4):
        from microcoder.buffer.client import BufferClient

        super().__init__()
        self.name = name
        self.per_group_s = per_group_s
        self.slots = slots
        self.client = BufferClient(address, owner=name)
        self.groups = 0
        self._serial = threading.Lock()  # one group judged at a time

    def run(self) -> dict[str, Any]:
        self.start_clock()
        judging_loop(
            self.client, self._judge, self._record, self.timer, self._stop, slots=self.slots
        )
        return {"name": self.name, "groups": self.groups, **self.summary()}

    def _judge(self, groups):
        with self._serial:
            time.sleep(self.per_group_s * len(groups))
        scored = [
            GroupScores(
                g.group_id,
                [Score(float(i % 2), "AC" if i % 2 else "WA") for i in range(len(g.responses))],
                executor=self.name,
            )
            for g in groups
        ]
        return ScoringOutcome(scored=scored)

    def _record(self, out) -> None:
        self.groups += len(out.scored)


class SimLearner:
    def __init__(self, address: str, batch_size: int, train_s: float):
        from microcoder.buffer.client import BufferClient

        self.batch_size = batch_size
        self.train_s = train_s
        self.client = BufferClient(address, owner="learner")
        self.version = 0
        self.cpu_s = 0.0
        """CPU seconds of this actor's process during `run` (set when it returns)."""

    def ready(self) -> bool:
        return True

    def latest_version(self) -> int:
        """The newest weights a generator could pull (LearnerRank.latest_version)."""
        return self.version

    def run(self, steps: int) -> list[dict[str, Any]]:
        """`steps` optimizer steps; per step: when it ended, its wait and staleness."""
        out = []
        cpu0 = time.process_time()
        for _ in range(steps):
            t0 = time.monotonic()
            batch = self.client.get_batch(self.batch_size, self.version, timeout_s=300.0)
            t1 = time.monotonic()
            time.sleep(self.train_s)
            self.version += 1
            self.client.announce_version(self.version)
            stale = batch.staleness
            out.append(
                {
                    "end": time.monotonic(),
                    "wait_s": t1 - t0,
                    "groups": len(batch.groups),
                    "staleness_mean": sum(stale) / max(len(stale), 1),
                    "staleness_max": max(stale, default=0),
                }
            )
            if batch.done:
                break
        self.cpu_s = time.process_time() - cpu0
        return out

    def cpu(self) -> float:
        """CPU seconds of the last `run` (its own and its latest_version answers)."""
        return self.cpu_s

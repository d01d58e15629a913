"""Simulated pipeline actors for `microcoder bench pipeline`: a benchmark instrument, not product
code. They run the product's own loops against the real buffer (BufferClient -> the BufferHost
actor, with its admission control and staleness gate); only the work inside a wave is a
`time.sleep(cost)`:

- SimGenerator: `generation_loop` of actors/generator.py (lease up to `wave` prompts -> sync ->
  generate -> hand in); its sync learns the learner's newest version, its generate sleeps
  `per_group_s` per leased prompt and makes one group of `group_size` tiny responses per prompt,
  tagged with that version. `sync_before_lease=True` learns the version before the lease
  instead (the order actors/generator.py had until issue 7): a lease that waits in the buffer's
  long poll while the learner steps then carries an older tag than admission control assumed,
  and with many generators those groups go stale and are dropped;
- SimExecutor: `judging_loop` of actors/executor.py (lease up to `max_groups` unscored groups ->
  judge -> hand in the scores); its judge sleeps `per_group_s` per group;
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


class _Sim:
    """Control methods of a simulated actor; `timer` (a PoolTimer) starts with its loop."""

    def __init__(self) -> None:
        from microcoder.actors.timing import PoolTimer

        self.timer = PoolTimer()
        self._stop = threading.Event()

    def ready(self) -> bool:
        return True

    def stop(self) -> None:
        self._stop.set()

    def summary(self) -> dict[str, float]:
        """Busy seconds (inside the simulated work) and the wall seconds of the loop."""
        s = self.timer.summary()
        return {"busy_s": s["busy_s"], "wall_s": s["wall_s"]}


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
    ):
        from microcoder.buffer.client import BufferClient

        super().__init__()
        self.name, self.learner, self.group_size = name, learner, group_size
        self.per_group_s, self.wave, self.response_tokens = per_group_s, wave, response_tokens
        self.client = BufferClient(address, owner=name)
        self.sync_before_lease = sync_before_lease
        self.version = 0
        self.groups = 0

    def run(self) -> dict[str, Any]:
        from microcoder.actors.generator import generation_loop
        from microcoder.actors.timing import PoolTimer

        self.timer = PoolTimer()
        client, sync = self.client, self._sync
        if self.sync_before_lease:
            client, sync = _SyncFirst(self.client, self._sync), _nothing
        generation_loop(client, self.wave, sync, self._generate, self.timer, self._stop)
        return {"name": self.name, "groups": self.groups, **self.summary()}

    def _sync(self) -> None:
        import ray

        self.version = ray.get(self.learner.latest_version.remote())

    def _generate(self, assignments) -> list:
        time.sleep(self.per_group_s * len(assignments))
        self.groups += len(assignments)
        return [self._group(a) for a in assignments]

    def _group(self, a):
        import numpy as np

        from microcoder.buffer.groups import Group, Response

        t = self.response_tokens
        responses = [
            Response(
                response_ids=np.full(t, 7, np.int32),
                logprobs=np.full(t, -1.0, np.float32),
                policy_version=self.version,
                finish_reason="stop",
            )
            for _ in range(self.group_size)
        ]
        return Group(
            group_id=a.group_id,
            problem_id=a.problem_id,
            prompt=a.prompt,
            prompt_ids=np.full(8, 3, np.int32),
            responses=responses,
            generator=self.name,
        )


class _SyncFirst:
    """A BufferClient whose lease first runs `sync` (the sync-before-lease order)."""

    def __init__(self, client, sync) -> None:
        self.client, self.sync = client, sync

    def get_prompts(self, n: int, wait_s: float):
        self.sync()
        return self.client.get_prompts(n, wait_s=wait_s)

    def put_unscored(self, groups) -> None:
        self.client.put_unscored(groups)


def _nothing() -> None:
    pass


class SimExecutor(_Sim):
    def __init__(self, name: str, address: str, per_group_s: float, max_groups: int = 4):
        from microcoder.buffer.client import BufferClient

        super().__init__()
        self.name, self.per_group_s, self.max_groups = name, per_group_s, max_groups
        self.client = BufferClient(address, owner=name)
        self.groups = 0

    def run(self) -> dict[str, Any]:
        from microcoder.actors.executor import judging_loop
        from microcoder.actors.timing import PoolTimer

        self.timer = PoolTimer()
        judging_loop(
            self.client, self.max_groups, self._judge, self._record, self.timer, self._stop
        )
        return {"name": self.name, "groups": self.groups, **self.summary()}

    def _judge(self, groups):
        from microcoder.actors.scoring import ScoringOutcome
        from microcoder.buffer.groups import GroupScores, Score

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

        self.batch_size, self.train_s = batch_size, train_s
        self.client = BufferClient(address, owner="learner")
        self.version = 0

    def ready(self) -> bool:
        return True

    def latest_version(self) -> int:
        """The newest weights a generator could pull (LearnerRank.latest_version)."""
        return self.version

    def run(self, steps: int) -> list[dict[str, Any]]:
        """`steps` optimizer steps; per step: when it ended, its wait and staleness."""
        out = []
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
        return out

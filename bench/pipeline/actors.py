"""Simulated pipeline actors for `microcoder bench pipeline`: a benchmark instrument, not product
code. They talk to the real buffer (BufferClient -> the BufferHost actor, with its admission
control and staleness gate) like the product actors do, but their work is `time.sleep(cost)`:

- SimGenerator: lease up to `wave` prompts -> learn the learner's newest version -> sleep
  `per_group_s` per leased prompt -> hand in one group of `group_size` tiny responses per prompt,
  tagged with that version (the loop of actors/generator.py, with sampling replaced by a sleep).
  actors/generator.py syncs BEFORE it leases (`sync_before_lease=True` reproduces that): a lease
  that waits in the buffer's long poll while the learner steps then carries an older tag than
  admission control assumed, and with many generators those groups go stale and are dropped;
- SimExecutor: lease up to `max_groups` unscored groups -> sleep `per_group_s` per group -> hand
  in scores (the loop of actors/executor.py);
- SimLearner: get_batch(batch_size) at its version -> sleep `train_s` -> version + 1 ->
  announce_version (one optimizer step of actors/learner_rank.py + learner_group.py).

Costs are linear in groups, so a pool's throughput is exactly (replicas / per-batch cost) and the
ideal pipeline bound is well defined. Sleeping costs no CPU: the figures do not depend on how
busy the shared machine is, only on the pipeline's coordination overheads.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class _Timed:
    """Busy seconds (the simulated work) and the wall time of the loop."""

    def __init__(self) -> None:
        self.busy_s = 0.0
        self.started = 0.0
        self.ended = 0.0
        self._stop = threading.Event()

    def ready(self) -> bool:
        return True

    def stop(self) -> None:
        self._stop.set()

    def work(self, seconds: float) -> None:
        time.sleep(seconds)
        self.busy_s += seconds

    def summary(self) -> dict[str, float]:
        end = self.ended or time.monotonic()
        wall = max(end - self.started, 1e-9) if self.started else 0.0
        return {"busy_s": self.busy_s, "wall_s": wall}


class SimGenerator(_Timed):
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
        import ray

        self.started = time.monotonic()
        while not self._stop.is_set():
            if self.sync_before_lease:
                self.version = ray.get(self.learner.latest_version.remote())
            reply = self.client.get_prompts(self.wave, wait_s=0.5)
            if reply.done:
                break
            if not reply.assignments:
                continue
            if not self.sync_before_lease:
                self.version = ray.get(self.learner.latest_version.remote())
            self.work(self.per_group_s * len(reply.assignments))
            self.client.put_unscored([self._group(a) for a in reply.assignments])
            self.groups += len(reply.assignments)
        self.ended = time.monotonic()
        return {"name": self.name, "groups": self.groups, **self.summary()}

    def _group(self, a):
        import numpy as np

        from microcoder.buffer.messages import Group, Response

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


class SimExecutor(_Timed):
    def __init__(self, name: str, address: str, per_group_s: float, max_groups: int = 4):
        from microcoder.buffer.client import BufferClient

        super().__init__()
        self.name, self.per_group_s, self.max_groups = name, per_group_s, max_groups
        self.client = BufferClient(address, owner=name)
        self.groups = 0

    def run(self) -> dict[str, Any]:
        from microcoder.buffer.messages import GroupScores, Score

        self.started = time.monotonic()
        while not self._stop.is_set():
            groups = self.client.get_unscored(self.max_groups, wait_s=0.5)
            if not groups:
                continue
            self.work(self.per_group_s * len(groups))
            scores = [
                GroupScores(
                    g.group_id,
                    [Score(float(i % 2), "AC" if i % 2 else "WA") for i in range(len(g.responses))],
                    executor=self.name,
                )
                for g in groups
            ]
            self.client.put_scored(scores)
            self.groups += len(groups)
        self.ended = time.monotonic()
        return {"name": self.name, "groups": self.groups, **self.summary()}


class SimLearner(_Timed):
    def __init__(self, address: str, batch_size: int, train_s: float):
        from microcoder.buffer.client import BufferClient

        super().__init__()
        self.batch_size, self.train_s = batch_size, train_s
        self.client = BufferClient(address, owner="learner")
        self.version = 0

    def latest_version(self) -> int:
        """The newest weights a generator could pull (LearnerRank.latest_version)."""
        return self.version

    def run(self, steps: int) -> list[dict[str, Any]]:
        """`steps` optimizer steps; per step: when it ended, its wait and staleness."""
        out = []
        self.started = time.monotonic()
        for _ in range(steps):
            t0 = time.monotonic()
            batch = self.client.get_batch(self.batch_size, self.version, timeout_s=300.0)
            t1 = time.monotonic()
            self.work(self.train_s)
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
        self.ended = time.monotonic()
        return out

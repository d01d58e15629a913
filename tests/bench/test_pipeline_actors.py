"""The simulated pipeline actors run the product's loops (actors/generator.py: generation_loop,
actors/executor.py: judging_loop): the order of the calls of one wave, on a recording client."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from microcoder.actors.executor import judging_loop
from microcoder.actors.generator import generation_loop
from microcoder.actors.scoring import ScoringOutcome
from microcoder.actors.timing import PoolTimer
from microcoder.bench.pipeline.actors import _SyncFirst


class RecordingClient:
    """One lease with assignments, then the run is over; every call is logged."""

    def __init__(self, log: list[str]):
        self.log, self.leases = log, 0

    def get_prompts(self, n: int, wait_s: float):
        self.log.append(f"lease {n}")
        self.leases += 1
        return SimpleNamespace(done=self.leases > 1, assignments=["a", "b"][:n])

    def put_unscored(self, groups) -> None:
        self.log.append(f"put {len(groups)}")

    def get_unscored(self, n: int, wait_s: float):
        self.log.append(f"lease {n}")
        return ["g1", "g2"]

    def put_scored(self, scores) -> None:
        self.log.append(f"scored {len(scores)}")

    def fail_group(self, gid: int, reason: str) -> None:
        self.log.append(f"failed {gid}")


def _generate(log):
    def generate(assignments):
        log.append(f"generate {len(assignments)}")
        return list(assignments)

    return generate


def test_the_generation_loop_syncs_after_the_lease_and_before_sampling():
    log: list[str] = []
    waves = generation_loop(
        RecordingClient(log),
        2,
        lambda: log.append("sync"),
        _generate(log),
        PoolTimer(),
        threading.Event(),
    )
    assert (waves, log) == (1, ["lease 2", "sync", "generate 2", "put 2", "lease 2"])


def test_sync_before_lease_moves_the_sync_ahead_of_the_lease_in_the_same_loop():
    log: list[str] = []
    client = _SyncFirst(RecordingClient(log), lambda: log.append("sync"))
    generation_loop(client, 2, lambda: None, _generate(log), PoolTimer(), threading.Event())
    assert log == ["sync", "lease 2", "generate 2", "put 2", "sync", "lease 2"]


def test_the_judging_loop_hands_in_scores_and_failures_before_recording_the_wave():
    log: list[str] = []

    def judge(groups):
        log.append(f"judge {len(groups)}")
        return ScoringOutcome(scored=["s"], failed=[(7, "SE")], tests_run=3)

    waves = judging_loop(
        RecordingClient(log),
        4,
        judge,
        lambda out: log.append(f"record {out.tests_run}"),
        PoolTimer(),
        threading.Event(),
        max_waves=1,
    )
    assert (waves, log) == (1, ["lease 4", "judge 2", "scored 1", "failed 7", "record 3"])

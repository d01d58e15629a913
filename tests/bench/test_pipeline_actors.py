"""The simulated pipeline actors run the product's loops (actors/generate_loop.py: streaming_loop on a
simulated engine, actors/judge_loop.py: judging_loop): the order of the calls, on a recording
client."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from microcoder.actors.generate_loop import streaming_loop
from microcoder.actors.judge_loop import judging_loop
from microcoder.actors.scoring import ScoringOutcome
from microcoder.actors.timing import PoolTimer
from microcoder.bench.pipeline.actors import _SyncFirst
from microcoder.bench.pipeline.sim_engine import SimEngine, SimParams
from microcoder.protocol import PromptAssignment


class RecordingClient:
    """Leases with assignments (`rounds` of them), then the run is over; every call is logged."""

    def __init__(self, log: list[str], rounds: int = 1):
        self.log, self.leases, self.rounds, self.next_id = log, 0, rounds, 0

    def get_prompts(self, n: int, wait_s: float):
        self.log.append(f"lease {n}")
        self.leases += 1
        done = self.leases > self.rounds
        got = [] if done else [self._assignment() for _ in range(min(n, 2))]
        return SimpleNamespace(done=done, assignments=got, retry_after_s=0.0)

    def _assignment(self) -> PromptAssignment:
        self.next_id += 1
        return PromptAssignment(group_id=self.next_id, problem_id="p", prompt="p")

    def put_unscored(self, groups) -> None:
        self.log.append(f"put {len(groups)}")

    def get_unscored(self, n: int, wait_s: float):
        self.log.append(f"lease {n}")
        return [SimpleNamespace(group_id=i, responses=[0, 0]) for i in range(min(n, 2))]

    def put_scored(self, scores) -> None:
        self.log.append(f"scored {len(scores)}")

    def fail_group(self, gid: int, reason: str) -> None:
        self.log.append(f"failed {gid}")


def _stream(client, engine, capacity: int, maybe_update=lambda: None, on_groups=None):
    return streaming_loop(
        client,
        engine,
        capacity=capacity,
        params_for=lambda a: SimParams(n=3),
        prompt_ids=lambda text: [3] * 4,
        version=lambda: 0,
        maybe_update=maybe_update,
        timer=PoolTimer(),
        stop=threading.Event(),
        on_groups=on_groups,
    )


def test_the_simulated_generator_streams_groups_through_the_product_loop():
    log: list[str] = []
    client = RecordingClient(log)
    engine = SimEngine(per_group_s=0.01, response_tokens=4)
    try:
        stats = _stream(client, engine, capacity=2)
    finally:
        engine.shutdown()
    assert log[0] == "lease 2" and client.leases == 2  # the second lease learns the run is over
    assert sum(int(e.split()[1]) for e in log if e.startswith("put")) == 2
    assert (stats.groups, stats.tokens) == (2, 2 * 3 * 4)


def test_the_simulated_engine_is_serial_at_per_group_s():
    engine = SimEngine(per_group_s=0.05, response_tokens=4)
    t0 = time.monotonic()
    try:
        stats = _stream(RecordingClient([], rounds=2), engine, capacity=4)
    finally:
        engine.shutdown()
    assert stats.groups == 4 and time.monotonic() - t0 >= 4 * 0.05


def test_a_label_change_mid_group_gives_first_and_last_versions():
    engine = SimEngine(per_group_s=0.2, response_tokens=4)
    groups: list = []

    calls = []

    def update_once():  # the first call comes before the group is submitted, the next after
        calls.append(1)
        if len(calls) == 2:
            engine.set_version(1)

    try:
        _stream(RecordingClient([]), engine, 1, maybe_update=update_once, on_groups=groups.extend)
    finally:
        engine.shutdown()
    assert {(r.policy_version, r.last_policy_version) for g in groups for r in g.responses} == {
        (0, 1)
    }


def test_sync_before_lease_runs_the_sync_ahead_of_every_lease():
    log: list[str] = []
    client = _SyncFirst(RecordingClient(log), lambda: log.append("sync"))
    engine = SimEngine(per_group_s=0.01, response_tokens=4)
    try:
        _stream(client, engine, capacity=2)
    finally:
        engine.shutdown()
    leases = [i for i, e in enumerate(log) if e.startswith("lease")]
    assert leases and all(log[i - 1] == "sync" for i in leases)


def test_the_judging_loop_hands_in_scores_and_failures_before_recording_the_group():
    log: list[str] = []

    def judge(groups):
        log.append(f"judge {len(groups)}")
        return ScoringOutcome(scored=["s"], failed=[(7, "SE")], tests_run=3)

    stats = judging_loop(
        RecordingClient(log),
        judge,
        lambda out: log.append(f"record {out.tests_run}"),
        PoolTimer(),
        threading.Event(),
        slots=4,
        max_groups=1,
    )
    assert (stats.groups, log) == (1, ["lease 1", "judge 1", "scored 1", "failed 7", "record 3"])


def test_after_lease_runs_before_the_leased_groups_are_submitted():
    """A lease may wait while the learner steps: the hook runs between the lease and the
    submission of its groups (the Generator's skips its poll throttle there)."""
    log: list[str] = []
    engine = SimEngine(per_group_s=0.01, response_tokens=4)
    submit = engine.submit
    engine.submit = lambda coro: (log.append("submit"), submit(coro))[1]
    try:
        streaming_loop(
            RecordingClient(log),
            engine,
            capacity=2,
            params_for=lambda a: SimParams(n=3),
            prompt_ids=lambda text: [3] * 4,
            version=lambda: 0,
            maybe_update=lambda: log.append("tick"),
            after_lease=lambda: log.append("after_lease"),
            timer=PoolTimer(),
            stop=threading.Event(),
        )
    finally:
        engine.shutdown()
    first = log.index("lease 2")
    assert log[first + 1 : first + 4] == ["after_lease", "submit", "submit"]
    assert log.count("after_lease") == 1  # only the lease that returned prompts

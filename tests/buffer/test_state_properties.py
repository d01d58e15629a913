"""Random interleavings of every actor's moves against BufferState (hypothesis state machine).

Properties checked after every step: no group above the staleness bound is ever delivered, no
group is delivered twice or mixed with another's payload, the accounting invariant holds, and
admission control never lets in_flight + trained exceed (k + 1 + v) * batch_size.

Generators also behave as a streaming generator does (`stream_put`): it holds several leases at
once, leases more while holding them, and hands groups in one at a time in any order, each
response carrying a first and a last policy version (an in-flight weight update in between);
the buffer measures staleness from the oldest first version.

The learner is a DAPO learner: it drops (filters) some delivered groups and asks for more until
it has kept batch_size, reporting the dropped ones with its next request; after a full batch it
trains (announces version + 1). In `honest` runs that is the only way versions move and groups
are consumed, and admission must never deadlock: whenever the learner has reported what it
filtered, either a group is in flight or prompts may be handed out. In the other runs chaotic
consumers (random batches, random version bumps) run as well.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from microcoder.buffer.prompts import DatasetPrompts
from microcoder.buffer.snapshot import export_state, import_state
from microcoder.buffer.state import BufferState
from microcoder.protocol import Group, GroupScores, Response, Score

GENS, EXECS = ("g0", "g1"), ("e0", "e1")


def group_of(gid: int, pid: str, versions: list[int], last: list[int] | None = None) -> Group:
    """A group with one response per first version (`last`: each one's last version)."""
    responses = [
        Response(
            np.zeros(2, np.int32),
            np.zeros(2, np.float32),
            policy_version=v,
            last_policy_version=None if last is None else last[i],
        )
        for i, v in enumerate(versions)
    ]
    return Group(gid, pid, responses=responses)


class BufferMachine(RuleBasedStateMachine):
    @initialize(
        k=st.integers(0, 3),
        batch=st.integers(1, 4),
        high_water=st.integers(1, 6),
        problems=st.integers(1, 6),
        epochs=st.integers(0, 2),
        lease=st.sampled_from([0.0, 5.0]),
        honest=st.booleans(),
        weak=st.booleans(),
    )
    def setup(self, k, batch, high_water, problems, epochs, lease, honest, weak):
        self.args = ([f"p{i}" for i in range(problems)], epochs)
        self.params = (batch, k, high_water, lease)
        self.state = BufferState(DatasetPrompts(*self.args, seed=1), *self.params)
        self.k, self.batch = k, batch
        self.held = {o: [] for o in GENS + EXECS}  # what each actor believes it holds
        self.oldest: dict[int, int] = {}  # group id -> oldest policy version we put
        self.delivered: set[int] = set()
        self.now = 0.0
        self.honest, self.weak = honest, weak  # weak: every group has equal rewards (filtered)
        self.kept, self.pending_filtered, self.run_over = 0, [], False

    @rule(owner=st.sampled_from(GENS), n=st.integers(0, 5))
    def get_prompts(self, owner, n):
        got = self.state.get_prompts(owner, n, self.now)
        self.held[owner] += [(a.group_id, a.problem_id) for a in got]

    @rule(owner=st.sampled_from(GENS), data=st.data(), wrong_owner=st.booleans())
    def put_unscored(self, owner, data, wrong_owner):
        """The generator hands in every group it holds (responses lag the learner by 0-3)."""
        for gid, pid in list(self.held[owner]):
            lags = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
            versions = [max(0, self.state.version - lag) for lag in lags]
            who = "intruder" if wrong_owner else owner
            blob = f"G{gid}".encode()
            outcome = self.state.put_unscored(who, group_of(gid, pid, versions), blob, self.now)
            if wrong_owner:
                assert outcome not in ("accepted", "full")
            elif outcome != "full":
                self.held[owner].remove((gid, pid))
            if outcome == "accepted":
                self.oldest[gid] = min(versions)

    @rule(owner=st.sampled_from(GENS), data=st.data())
    def stream_put(self, owner, data):
        """A streaming generator hands in one of the groups it holds, whichever finished first;
        each response spans a first..last version (first lagging the learner by 0-3)."""
        if not self.held[owner]:
            return
        pick = data.draw(st.integers(0, len(self.held[owner]) - 1), label="finished")
        gid, pid = self.held[owner][pick]
        v = self.state.version
        lags = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3), label="lags")
        first = [max(0, v - lag) for lag in lags]
        last = [data.draw(st.integers(f, v), label="last") for f in first]
        outcome = self.state.put_unscored(
            owner, group_of(gid, pid, first, last), f"G{gid}".encode(), self.now
        )
        if outcome != "full":
            self.held[owner].remove((gid, pid))
        if outcome == "accepted":
            self.oldest[gid] = min(first)

    @rule(owner=st.sampled_from(EXECS), n=st.integers(1, 4))
    def get_unscored(self, owner, n):
        for gid, blob in self.state.get_unscored(owner, n, self.now):
            assert blob == f"G{gid}".encode()
            self.held[owner].append((gid, None))

    @rule(owner=st.sampled_from(EXECS), extra=st.booleans())
    def put_scored(self, owner, extra):
        """The executor hands in every group it holds (`extra`: with one score too many)."""
        for gid, _ in list(self.held[owner]):
            slot = self.state.slots.get(gid)
            count = (slot.n_responses if slot else 1) + (1 if extra else 0)
            scores = GroupScores(gid, [Score(1.0, "AC")] * count)
            outcome = self.state.put_scored(owner, scores, f"S{gid}".encode(), self.now)
            if extra:
                assert outcome not in ("accepted", "full")
            elif outcome != "full":
                self.held[owner].remove((gid, None))

    @rule(data=st.data(), n=st.integers(1, 4))
    def honest_round(self, data, n):
        """Everyone does their job once, so random runs also reach the learner often."""
        self.get_prompts("g0", n)
        for owner in GENS:
            self.put_unscored(owner, data, False)
        self.get_unscored("e0", n)
        self.put_scored("e0", False)

    @rule(owner=st.sampled_from(GENS + EXECS), pick=st.integers(0, 10))
    def fail(self, owner, pick):
        if self.held[owner]:
            gid, pid = self.held[owner].pop(pick % len(self.held[owner]))
            self.state.fail_group(owner, gid, "test")

    @rule(owner=st.sampled_from(GENS + EXECS))
    def release(self, owner):
        self.state.release(owner)
        self.held[owner] = []

    @rule(dt=st.floats(0, 4))
    def tick(self, dt):
        self.now += dt
        self.state.expire(self.now)

    @precondition(lambda self: not self.honest)
    @rule(step=st.integers(0, 2))
    def announce(self, step):
        self.state.advance(self.state.version + step)

    @precondition(lambda self: not self.honest)
    @rule(n=st.integers(1, 4), ahead=st.integers(0, 1))
    def get_batch(self, n, ahead):
        version = self.state.version + ahead
        self.check_delivery(version, n, self.state.get_batch(n, version))

    @rule(data=st.data())
    def learner_fetch(self, data):
        """DAPO learner: report what it filtered, ask for the rest of its batch, filter, train."""
        self.state.report_filtered(self.pending_filtered)
        self.pending_filtered = []
        self.admission_never_deadlocks()
        version, n = self.state.version, self.batch - self.kept
        got = self.state.get_batch(n, version)
        self.check_delivery(version, n, got)
        if got is None:
            return
        for d in got[0]:
            if self.weak or data.draw(st.booleans(), label="filtered"):
                self.pending_filtered.append(d.group_id)
            else:
                self.kept += 1
        self.run_over = got[1]
        if self.kept == self.batch:
            self.state.advance(version + 1)
            self.kept = 0

    def check_delivery(self, version, n, got):
        if got is None:
            return
        delivered, done = got
        assert len(delivered) == n or done
        for d in delivered:
            assert d.group_id not in self.delivered, "delivered twice"
            assert (d.group, d.scores) == (f"G{d.group_id}".encode(), f"S{d.group_id}".encode()), (
                "payload mixed"
            )
            assert version - self.oldest[d.group_id] <= self.k, "staleness bound broken"
            assert d.staleness == version - self.oldest[d.group_id]
            self.delivered.add(d.group_id)

    @rule()
    def snapshot_and_restore(self):
        data = export_state(self.state)
        fresh = BufferState(DatasetPrompts(*self.args, seed=1), *self.params)
        import_state(fresh, data)
        self.state = fresh
        self.held = {o: [] for o in GENS + EXECS}  # restore returns every lease

    @invariant()
    def accounting_is_exact(self):
        if hasattr(self, "state"):
            assert self.state.violations() == []

    @invariant()
    def every_issued_group_is_consumed_dropped_failed_or_in_flight(self):
        if hasattr(self, "state"):
            c, in_flight = self.state.counters, sum(self.state.depth.values())
            assert c.issued == c.consumed + c.dropped_stale + c.failed + in_flight

    @invariant()
    def admission_bounds_work_in_progress(self):
        if hasattr(self, "state"):
            s, c = self.state, self.state.counters
            in_flight = sum(s.depth.values())
            trained = c.consumed - c.filtered
            assert in_flight + trained <= (self.k + 1 + s.version) * self.batch

    @invariant()
    def admission_never_deadlocks(self):
        """With the learner asking (its filtered groups reported), there is always work: a group
        in flight that will reach it, or capacity to hand out another prompt."""
        if hasattr(self, "state") and self.honest and not self.pending_filtered:
            if not self.run_over:
                assert sum(self.state.depth.values()) > 0 or self.state.capacity() > 0, (
                    "admission deadlock: nothing in flight and no capacity while the learner waits"
                )


BufferMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestBufferStateMachine = BufferMachine.TestCase

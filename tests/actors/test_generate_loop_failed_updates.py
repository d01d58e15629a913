"""actors/generate_loop.py: a weight update that fails costs the groups in flight nothing (issue 33,
fault 6). A unit test: the engine is a stand-in whose group tasks are futures this test
finishes, the buffer client records what it is given; the loop itself is the product's."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest
from engine_testing.loop import FutureEngine, run_loop

from microcoder.actors.generate_loop import WeightUpdatesFailed
from microcoder.actors.weights.publisher import WeightsMixedError
from microcoder.protocol import Group, PromptAssignment, Prompts


class HeldEngine(FutureEngine):
    """Each submitted group is a future the test finishes (`finish_all`) or the loop cancels."""

    cache_salt = "w0"

    def __init__(self) -> None:
        self.tasks: list[tuple[int, concurrent.futures.Future]] = []

    def started(self, group_id: int, future: concurrent.futures.Future) -> None:
        self.tasks.append((group_id, future))

    def finish_all(self) -> None:
        for gid, f in self.tasks:
            if not f.done():
                f.set_result(Group(group_id=gid, problem_id=f"p{gid}"))


class Client:
    def __init__(self, n: int):
        self.todo = [
            PromptAssignment(group_id=i, problem_id=f"p{i}", prompt=f"p{i}") for i in range(n)
        ]
        self.leases = 0
        self.put: list[int] = []

    def get_prompts(self, n: int, wait_s: float = 0.0) -> Prompts:
        got, self.todo = self.todo[:n], self.todo[n:]
        self.leases += bool(got)
        return Prompts(assignments=got, done=not got)

    def put_unscored(self, groups) -> None:
        self.put += [g.group_id for g in groups]


def loop(client, engine, maybe_update, **kw):
    return run_loop(client, engine, maybe_update=maybe_update, **kw)


@pytest.mark.timeout(30)
def test_failed_updates_are_counted_and_retried_while_the_groups_in_flight_go_on():
    client, engine, calls, reported = Client(3), HeldEngine(), [], []

    def maybe_update():
        calls.append(len(calls))
        if len(calls) <= 2:  # rank 0 did not answer, twice
            raise TimeoutError("learner rank 0 did not answer latest_version within 1 s")
        engine.finish_all()  # the groups finish once the third try loaded the weights
        return True

    stats = loop(client, engine, maybe_update, on_update_error=lambda e, n: reported.append(n))
    assert sorted(client.put) == [0, 1, 2]
    assert stats.groups == 3 and stats.inflight == 0
    assert stats.update_failures == 2 and reported == [1, 2]
    assert not any(f.cancelled() for _, f in engine.tasks)


@pytest.mark.timeout(30)
def test_after_k_failures_in_a_row_the_loop_hands_in_its_groups_then_names_the_peer():
    client, engine = Client(10), HeldEngine()

    def maybe_update():
        if len(engine.tasks) == 3 and not hasattr(maybe_update, "timer"):
            maybe_update.timer = threading.Timer(0.3, engine.finish_all)
            maybe_update.timer.start()
        raise TimeoutError("learner rank 0 (log RUN_DIR/logs/learner-0.log) did not answer")

    with pytest.raises(WeightUpdatesFailed) as caught:
        loop(client, engine, maybe_update, max_failed_updates=2, on_update_error=lambda e, n: None)
    text = str(caught.value)
    assert "2 weight updates in a row failed" in text
    assert "learner rank 0 (log RUN_DIR/logs/learner-0.log)" in text
    assert "learner.sync_timeout_s" in text and "generator.max_failed_syncs" in text
    assert "handed in the 3 group(s)" in text
    assert client.leases == 1 and sorted(client.put) == [0, 1, 2]  # kept, none leased after
    assert not any(f.cancelled() for _, f in engine.tasks)


@pytest.mark.timeout(30)
def test_a_load_that_failed_after_it_began_ends_the_loop_at_once():
    client, engine = Client(3), HeldEngine()

    def maybe_update():
        if engine.tasks:
            try:
                raise WeightsMixedError("gen-0: the weight load failed after it may have begun")
            except WeightsMixedError as err:
                raise RuntimeError("gen-0: weight update to version 2 failed") from err

    with pytest.raises(RuntimeError, match="version 2 failed"):
        loop(client, engine, maybe_update)
    assert client.put == [] and all(f.cancelled() for _, f in engine.tasks)


@pytest.mark.timeout(30)
def test_while_a_weight_send_is_pending_nothing_is_leased_and_finished_groups_are_handed_in():
    """`hold_leases` (the Generator's: a send asked of rank 0 and not yet ready): the loop keeps
    ticking, hands in the groups that finish, and leases again once the weights are loaded."""
    client, engine, state = Client(6), HeldEngine(), {"held": False, "ticks": 0}
    leased_while_held, put_while_held = [], []
    lease = client.get_prompts

    def get_prompts(n, wait_s=0.0):
        leased_while_held.append(state["held"])
        return lease(n, wait_s)

    client.get_prompts = get_prompts

    def maybe_update():
        state["ticks"] += 1
        if state["ticks"] == 1:  # the first tick asks rank 0 to send: pending from now on
            state["held"] = True
        elif state["ticks"] == 3:  # the groups in flight finish while rank 0 trains
            engine.finish_all()
        elif state["ticks"] == 20:  # rank 0 is ready: the weights are loaded
            put_while_held.extend(client.put)
            state["held"] = False
            return True
        if state["ticks"] > 20:
            engine.finish_all()
        return False

    stats = loop(client, engine, maybe_update, hold_leases=lambda: state["held"])
    assert not any(h for h in leased_while_held)  # no lease while the send was pending
    assert sorted(put_while_held) == [0, 1, 2]  # handed in while it was
    assert sorted(client.put) == list(range(6)) and stats.groups == 6

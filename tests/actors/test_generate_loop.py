"""actors/generate_loop.py's streaming_loop on a real AsyncLLM (the tiny model) with a recording fake
buffer client (a unit test: the client is the only fake)."""

from __future__ import annotations

import threading

import pytest
from engine_testing.tiny_engine import engine_fixture

from microcoder.actors.generate_loop import streaming_loop
from microcoder.actors.sampling import sampling_params
from microcoder.actors.timing import PoolTimer
from microcoder.protocol import PromptAssignment, Prompts

pytestmark = pytest.mark.slow  # one AsyncLLM start (~20-40 s on 2 cores)

G = 2


# rpc_timeout_s: build_async_engine's own default, as this test always started it
engine = engine_fixture(rpc_timeout_s=600.0, max_response_tokens=256, max_prompt_tokens=64)


class RecordingClient:
    """Serves a fixed list of assignments, `per_call` at most per lease; records every call."""

    def __init__(self, assignments: list[PromptAssignment], per_call: int = 100):
        self.todo, self.per_call = list(assignments), per_call
        self.calls: list[tuple] = []  # ("lease", [gids]) / ("put", [gids])

    def get_prompts(self, n: int, wait_s: float = 0.0) -> Prompts:
        got, self.todo = self.todo[: min(n, self.per_call)], self.todo[min(n, self.per_call) :]
        self.calls.append(("lease", [a.group_id for a in got]))
        return Prompts(assignments=got, done=not got and not self.todo)

    def put_unscored(self, groups) -> None:
        self.calls.append(("put", [g.group_id for g in groups]))

    def put_order(self) -> list[int]:
        return [gid for kind, gids in self.calls if kind == "put" for gid in gids]


def assignments(n: int) -> list[PromptAssignment]:
    return [
        PromptAssignment(group_id=i, problem_id=f"p{i}", prompt=f"p{i}", source="mix")
        for i in range(n)
    ]


def run(engine, client, budgets: dict[int, int], capacity: int, bad=(), **kw):
    """The loop on `engine`: group i samples budgets[i] tokens per response (ignore_eos); the
    prompts in `bad` get a token id outside the vocabulary (vLLM refuses the request)."""

    def params_for(a: PromptAssignment):
        return sampling_params(
            group_size=G, temperature=1.0, max_tokens=budgets[a.group_id], ignore_eos=True
        )

    return streaming_loop(
        client,
        engine,
        capacity=capacity,
        params_for=params_for,
        prompt_ids=lambda text: [1, 2, 3, 10**8 if text in bad else 4 + int(text[1:])],
        version=lambda: 0,
        maybe_update=lambda: None,
        timer=PoolTimer(),
        stop=threading.Event(),
        **kw,
    )


def test_a_short_group_is_put_before_a_longer_group_that_started_earlier(engine):
    client = RecordingClient(assignments(2))
    stats = run(engine, client, {0: 200, 1: 4}, capacity=2)
    assert client.calls[0] == ("lease", [0, 1])  # both in flight, group 0 submitted first
    assert client.put_order() == [1, 0]
    assert stats.groups == 2 and stats.tokens == G * (200 + 4)


def test_each_response_carries_the_first_and_last_version_of_its_tokens(engine):
    client = RecordingClient(assignments(1))
    seen = []
    run(engine, client, {0: 8}, capacity=1, on_groups=seen.extend)
    versions = [(r.policy_version, r.last_policy_version) for r in seen[0].responses]
    assert versions == [(0, 0)] * G
    assert seen[0].source == "mix"  # the data source travels on with the group


def test_the_loop_keeps_at_most_capacity_groups_in_flight_and_leases_as_groups_finish(engine):
    client = RecordingClient(assignments(6))
    stats = run(engine, client, dict.fromkeys(range(6), 6), capacity=2)
    assert stats.max_inflight == 2
    leased = 0
    put = 0
    for kind, gids in client.calls:  # never more leased than put + capacity
        if kind == "lease":
            leased += len(gids)
        else:
            put += len(gids)
        assert leased - put <= 2
    assert sorted(client.put_order()) == list(range(6)) and stats.leased == 6


def test_a_group_whose_task_raises_goes_to_on_error_and_the_loop_goes_on(engine):
    client = RecordingClient(assignments(3))
    errors = []
    budgets = dict.fromkeys(range(3), 4)
    stats = run(
        engine,
        client,
        budgets,
        capacity=3,
        bad={"p1"},
        on_error=lambda a, e: errors.append(a.group_id),
    )
    assert errors == [1]
    assert sorted(client.put_order()) == [0, 2] and stats.failed == 1


def test_max_groups_stops_leasing_and_finishes_what_is_in_flight(engine):
    client = RecordingClient(assignments(5))
    stats = run(engine, client, dict.fromkeys(range(5), 4), capacity=2, max_groups=3)
    assert stats.leased == 3 and sorted(client.put_order()) == [0, 1, 2]
    assert stats.inflight == 0

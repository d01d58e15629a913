"""A local Ray start whose raylet misses Ray's fixed 30 s registration deadline (a loaded
machine: "The current node timed out during startup") is tried again, said in the log, up to
RAY_START_TRIES; any other error, or the last try's, is raised as it is (launch/run/cluster.py:
init_local_ray). Ray's own `init` is replaced here by a stand-in that fails as Ray does; the
real start is every launch test's."""

from __future__ import annotations

import pytest
import ray

from microcoder.launch.run import cluster

TIMEOUT = Exception(
    "The current node timed out during startup. This could happen because some of the raylet "
    "failed to startup or the GCS has become overloaded."
)


def stand_in(monkeypatch, errors: list):
    calls = []

    def init(**kwargs):
        calls.append(kwargs)
        if errors:
            raise errors.pop(0)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    return calls


def test_a_start_that_timed_out_is_tried_again_and_said(monkeypatch):
    calls = stand_in(monkeypatch, [TIMEOUT])
    said = []
    cluster.init_local_ray(said.append, num_cpus=1)
    assert calls == [
        {"address": "local", "num_cpus": 1},
        "shutdown",
        {"address": "local", "num_cpus": 1},
    ]
    assert len(said) == 1 and "try 1 of 3" in said[0]


def test_the_last_try_and_other_errors_are_raised(monkeypatch):
    stand_in(monkeypatch, [TIMEOUT] * cluster.RAY_START_TRIES)
    with pytest.raises(Exception, match="timed out during startup"):
        cluster.init_local_ray(lambda line: None, num_cpus=1)
    calls = stand_in(monkeypatch, [ValueError("bad argument")])
    with pytest.raises(ValueError, match="bad argument"):
        cluster.init_local_ray(lambda line: None, num_cpus=1)
    assert calls == [{"address": "local", "num_cpus": 1}]  # not retried

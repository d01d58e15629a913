"""The evaluation loop names a failing or hung actor and the remedy (stand-in executor actors)."""

from __future__ import annotations

import time

import pytest

from microcoder.data.problem import Problem
from microcoder.evaluation.engine import evaluate
from microcoder.evaluation.generations import Generation
from microcoder.evaluation.settings import EvalError, EvalSettings

PROBLEMS = [Problem(f"p{i}", "stdin", "x", [{"input": "", "output": "1\n"}]) for i in range(3)]
GIVEN = [Generation(p.id, 0, f"print({i})", 1) for i, p in enumerate(PROBLEMS)]


class StandInExecutor:
    """Speaks the executor's evaluation methods; judges by failing or hanging."""

    def __init__(self, mode: str):
        self.mode = mode

    def ready(self):
        return {"workers": 1}

    def add_problems(self, problems):
        return len(problems)

    def judge_samples(self, jobs):
        if self.mode == "raise":
            raise RuntimeError("the sandbox exploded")
        time.sleep(120)
        return []


@pytest.fixture
def stand_in(ray_local):
    handles = []

    def make(mode):
        handles.append(ray_local.remote(max_concurrency=4)(StandInExecutor).remote(mode))
        ray_local.get(handles[-1].ready.remote(), timeout=120)  # started before any deadline runs
        return handles[-1]

    yield make
    for h in handles:
        ray_local.kill(h)


def test_an_actor_error_names_the_actor_and_says_resume(stand_in, tmp_path):
    with pytest.raises(EvalError, match=r"executor-0 failed .*the sandbox exploded.*--resume"):
        evaluate(PROBLEMS, EvalSettings(), [], [stand_in("raise")], tmp_path, generations=GIVEN)


def test_a_hung_call_stops_at_its_deadline_naming_the_actor(stand_in):
    # The stand-in answers after 120 s (with nothing): only the 5 s deadline gives this error.
    settings = EvalSettings(call_timeout_s=5.0)
    with pytest.raises(EvalError, match="judge-hang has not answered"):
        evaluate(PROBLEMS, settings, [], {"judge-hang": stand_in("hang")}, generations=GIVEN)

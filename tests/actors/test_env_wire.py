"""What an environment's sandbox call carries (actors/environments/executor_sandbox.py): plain
dicts both ways, the problem without what judging never reads, the run unchanged."""

from __future__ import annotations

import json

from microcoder.actors.environments.executor_sandbox import (
    problem_from_wire,
    problem_to_wire,
    program_run_of,
    run_from_wire,
    run_to_wire,
)
from microcoder.data.problem import Problem
from microcoder.protocol import ProgramRun
from microcoder.sandbox import JudgePool

PROBLEM = Problem(
    "f",
    "functional",
    "Twice. " * 500,
    [{"input": "4", "output": "8"}],
    fn_name="twice",
    starter_code="class Solution:\n    def twice(self, x): ...\n",
    time_limit_s=2.0,
    compare="default",
    prelude="import math\n",
    solutions=["class Solution:\n    def twice(self, x): return 2 * x\n"],
    public_tests=[{"input": "4", "output": "8"}],
    meta={"_canonical_outputs": ["stale"], "tags": ["x"]},
)


def test_the_problem_crosses_as_plain_json_without_what_judging_never_reads():
    row = problem_to_wire(PROBLEM)
    back = problem_from_wire(json.loads(json.dumps(row)))  # nothing but JSON types
    for name in ("id", "kind", "tests", "fn_name", "time_limit_s", "compare", "prelude"):
        assert getattr(back, name) == getattr(PROBLEM, name)
    assert (back.prompt, back.solutions, back.public_tests, back.meta) == ("", [], [], {})
    assert len(json.dumps(row)) < 600  # the 3,500-character statement stays home


def test_the_run_crosses_unchanged_and_is_the_judges_verdict():
    with JudgePool(workers=1) as pool:
        verdict = pool.judge(
            problem_from_wire(problem_to_wire(PROBLEM)), "def twice(x):\n    return x\n"
        )
    run = program_run_of(verdict)
    assert (run.verdict, run.passed, run.total, run.first_failed) == ("WA", 0, 1, 0)
    assert run.message == verdict.message and "expected 8" in run.message
    assert run_from_wire(json.loads(json.dumps(run_to_wire(run)))) == run
    assert run_from_wire({"verdict": "SE", "passed": 0, "total": 1}) == ProgramRun("SE", 0, 1)

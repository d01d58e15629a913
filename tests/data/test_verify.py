"""Reference verification (data/corpus/verify.py) in the real bubblewrap sandbox, on tiny problems."""

from __future__ import annotations

import pytest

from microcoder.data.corpus.verify import ReferenceCheck, verify_references
from microcoder.data.problem import validate_problem
from microcoder.sandbox import ExecutorConfig

GOOD = "a, b = map(int, input().split())\nprint(a + b)\n"
BAD = "a, b = map(int, input().split())\nprint(a - b)\n"
CONFIG = ExecutorConfig(workers=2, time_limit_s=2.0)


def _sum_problem(pid: str, solutions: list[str]):
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "40 2\n", "output": "42\n"}]
    return validate_problem({"id": pid, "kind": "stdin", "tests": tests, "solutions": solutions})


@pytest.fixture(scope="module")
def checks() -> dict[str, ReferenceCheck]:
    problems = [
        _sum_problem("good", [GOOD]),
        _sum_problem("bad", [BAD]),
        _sum_problem("bad-then-good", [BAD, GOOD]),
        _sum_problem("bad-then-good-max1", [BAD, GOOD]),
        _sum_problem("none", []),
    ]
    first = verify_references(problems[:4], max_per_problem=2, config=CONFIG, progress=False)
    capped = verify_references(problems[3:], max_per_problem=1, config=CONFIG, progress=False)
    return {**{k: v for k, v in first.items() if k != "bad-then-good-max1"}, **capped}


def test_a_passing_reference_verifies_the_problem(checks):
    assert checks["good"].passed and checks["good"].verdicts == ["AC"]


def test_a_failing_reference_fails_the_problem_with_its_verdict(checks):
    assert not checks["bad"].passed and checks["bad"].verdicts == ["WA"]


def test_the_second_reference_is_judged_when_the_first_fails(checks):
    assert checks["bad-then-good"].verdicts == ["WA", "AC"] and checks["bad-then-good"].passed


def test_verify_max_caps_the_references_judged(checks):
    assert checks["bad-then-good-max1"].verdicts == ["WA"]


def test_problems_without_references_are_not_judged(checks):
    assert "none" not in checks


def test_only_sandbox_faults_leave_a_problem_unverified():
    assert ReferenceCheck("p", ["SE", "SE"]).unverified
    assert not ReferenceCheck("p", ["SE", "WA"]).unverified

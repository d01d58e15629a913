import pytest

from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import ProblemFormatError


def _run(problem, test):
    ns: dict = {}
    exec(problem.meta["solution"] + "\n" + test["code"], ns)


def test_check_asserts_become_one_test_each(fixture_path):
    p = load_problems(fixture_path("humaneval.jsonl"), strict=False).problems[0]
    assert (p.kind, p.fn_name, len(p.tests)) == ("assert", "inc", 2)
    assert p.starter_code == p.prompt
    for t in p.tests:
        _run(p, t)


def test_split_tests_fail_a_wrong_solution(fixture_path):
    p = load_problems(fixture_path("humaneval.jsonl"), strict=False).problems[0]
    p.meta["solution"] = "def inc(x):\n    return x\n"
    with pytest.raises(AssertionError):
        _run(p, p.tests[0])


def test_check_with_a_loop_stays_one_whole_test(fixture_path):
    p = load_problems(fixture_path("humaneval.jsonl"), strict=False).problems[1]
    assert len(p.tests) == 1 and p.tests[0]["code"].rstrip().endswith("check(dbl)")
    _run(p, p.tests[0])


def test_missing_entry_point_raises_with_line(fixture_path):
    with pytest.raises(ProblemFormatError, match=r"humaneval.jsonl:3: field 'entry_point'"):
        load_problems(fixture_path("humaneval.jsonl"))

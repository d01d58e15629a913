"""Problem.public_tests (data/problem.py): the statement's examples, filled by the loaders whose
source marks them, validated like `tests`, kept by the run's problem store (data/store.py), and
empty for a row or a store written before the field."""

from __future__ import annotations

import json
import sqlite3
import zlib

import pytest

from microcoder.data.config import DataSourceConfig
from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import ProblemFormatError, validate_problem
from microcoder.data.store import ProblemStore, build_store

CODECONTESTS = {
    "name": "1548_A. Add",
    "description": "Add two numbers.",
    "public_tests": {"input": ["1 2\n", "2 2\n"], "output": ["3\n", "4\n"]},
    "private_tests": {"input": ["5 5\n"], "output": ["10\n"]},
    "generated_tests": {"input": ["7 1\n"], "output": ["8\n"]},
    "solutions": {"language": [3], "solution": ["print(sum(map(int, input().split())))"]},
}


def own(**extra) -> dict:
    return {
        "id": "p",
        "kind": "stdin",
        "prompt": "Add.",
        "tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}],
        **extra,
    }


def test_livecodebench_public_test_cases_are_the_public_tests(fixture_path):
    stdin, functional = load_problems(fixture_path("lcb.jsonl"), strict=False).problems[:2]
    assert stdin.public_tests == [{"input": "1 2\n", "output": "3\n"}]
    assert stdin.tests[0] == stdin.public_tests[0] and len(stdin.tests) == 2  # also judged
    assert functional.public_tests == [{"input": "4", "output": "8"}]


def test_codecontests_public_tests_are_the_public_group_only(tmp_path):
    f = tmp_path / "cc.jsonl"
    f.write_text(json.dumps(CODECONTESTS) + "\n")
    (p,) = load_problems(f)
    assert p.public_tests == [
        {"input": "1 2\n", "output": "3\n"},
        {"input": "2 2\n", "output": "4\n"},
    ]
    assert len(p.tests) == 4 and p.tests[:2] == p.public_tests


def test_sources_that_mark_no_examples_leave_them_empty(fixture_path):
    for name in ("apps.jsonl", "humaneval.jsonl", "rllm.json", "leetcodedataset.jsonl"):
        problems = load_problems(fixture_path(name), strict=False).problems
        assert problems and all(p.public_tests == [] for p in problems), name


def test_our_schema_validates_public_tests_like_tests():
    p = validate_problem(own(public_tests=[{"input": "1 2\n", "output": "3\n", "note": "x"}]))
    assert p.public_tests == [{"input": "1 2\n", "output": "3\n"}]  # other keys dropped
    assert validate_problem(own()).public_tests == []
    with pytest.raises(ProblemFormatError, match=r"public_tests\[0\].output"):
        validate_problem(own(public_tests=[{"input": "1"}]))
    with pytest.raises(ProblemFormatError, match="'public_tests': expected a list"):
        validate_problem(own(public_tests="1 2"))
    assertion = own(kind="assert", tests=[{"code": "assert f() == 1"}])
    with pytest.raises(ProblemFormatError, match=r"public_tests\[0\].code"):
        validate_problem({**assertion, "public_tests": [{"input": "", "output": ""}]})


def test_the_store_keeps_public_tests_and_reads_a_row_written_before_them(tmp_path):
    f = tmp_path / "own.jsonl"
    f.write_text(json.dumps(own(public_tests=[{"input": "1 2\n", "output": "3\n"}])) + "\n")
    path, _ = build_store([DataSourceConfig(path=str(f))], 0, 0.0, tmp_path / "s", log=print)
    assert ProblemStore(path).get("p").public_tests == [{"input": "1 2\n", "output": "3\n"}]
    con = sqlite3.connect(path)  # a row as a store written before the field holds it
    row = json.loads(zlib.decompress(con.execute("SELECT problem FROM problems").fetchone()[0]))
    del row["public_tests"]
    con.execute("UPDATE problems SET problem = ?", (zlib.compress(json.dumps(row).encode()),))
    con.commit()
    con.close()
    old = ProblemStore(path).get("p")
    assert old.public_tests == [] and old.tests == own()["tests"]

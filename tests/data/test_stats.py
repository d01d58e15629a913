"""`microcoder data stats` (data/corpus/stats.py) counts a fixture correctly."""

from __future__ import annotations

import argparse
import json

import pytest

from microcoder.data.corpus.stats import (
    bucket_of,
    cli_main,
    count_problems,
    file_stats,
    format_table,
)
from microcoder.data.problem import validate_problem


def _problem(pid: str, n_tests: int, **extra):
    tests = [{"input": f"{i}\n", "output": f"{i}\n"} for i in range(n_tests)]
    return validate_problem({"id": pid, "kind": "stdin", "tests": tests, **extra})


@pytest.fixture(scope="module")
def site_a():
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "data"
    return file_stats(str(fixtures / "build_site_a.jsonl"))


def test_stats_count_the_fixtures_problems_and_rejected_rows(site_a):
    assert (site_a["problems"], site_a["rejected"]) == (8, 1)


def test_stats_count_by_difficulty_with_none_for_blank(site_a):
    assert site_a["counts"]["difficulty"] == {"easy": 2, "medium": 1, "none": 5}


def test_stats_count_dates_by_month_with_none_for_undated(site_a):
    assert site_a["counts"]["date"] == {"2024-01": 6, "2025-02": 1, "none": 1}


def test_stats_bucket_test_counts_in_order(site_a):
    assert site_a["counts"]["tests"] == {"1": 5, "2-5": 3}


def test_test_buckets_have_the_documented_edges():
    edges = [bucket_of(n) for n in (1, 2, 5, 6, 10, 11, 50, 51, 100, 101)]
    assert edges == [
        "1",
        "2-5",
        "2-5",
        "6-10",
        "6-10",
        "11-50",
        "11-50",
        "51-100",
        "51-100",
        ">100",
    ]


def test_dates_spanning_more_than_24_months_are_counted_by_year():
    problems = [
        _problem(str(m), 1, date=f"{2000 + m // 12}-{m % 12 + 1:02d}-01") for m in range(30)
    ]
    assert count_problems(problems)["date"] == {"2000": 12, "2001": 12, "2002": 6}


def test_stats_json_prints_the_counts(site_a, capsys):
    args = argparse.Namespace(file=site_a["file"], json=True)
    assert cli_main(args) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["source"] == {"site_a": 8}


def test_stats_on_a_missing_file_exits_2(tmp_path, capsys):
    assert cli_main(argparse.Namespace(file=str(tmp_path / "none.jsonl"), json=False)) == 2
    assert "none.jsonl" in capsys.readouterr().err


def test_stats_name_the_first_rejected_row_and_why(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "kind": "stdin", "prompt": "p", "tests": []}\n')
    stats = file_stats(str(bad))
    assert stats["rejected"] == 1
    assert stats["first_reject"].startswith(f"{bad}:1: field 'tests'")
    assert "first rejected row" in format_table(stats)


def test_the_data_commands_reach_their_modules_through_the_cli(site_a, tmp_path, capsys):
    """`microcoder data stats|build` through the real parser: each command's module is found
    (a dispatch by a module name the room split had moved once ended in ModuleNotFoundError)."""
    from microcoder.launch.cli.main import main

    assert main(["data", "stats", site_a["file"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["source"] == {"site_a": 8}
    out, report = str(tmp_path / "out.jsonl"), str(tmp_path / "report")
    argv = ["data", "build", "--sources", site_a["file"], "--out", out, "--report", report]
    assert main([*argv, "--skip-verify"]) == 0
    assert (tmp_path / "out.jsonl").is_file()


def test_stats_reads_the_file_in_the_format_named_and_says_how_to_name_one(tmp_path, capsys):
    """`--format` reaches the loader (an lcb reading of a HumanEval file rejects every row),
    and a row no format recognises is answered with this command's own flag."""
    from pathlib import Path

    from microcoder.launch.cli.main import main

    humaneval = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "humaneval.jsonl"
    assert main(["data", "stats", str(humaneval), "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)
    assert auto["format"] == "humaneval" and auto["problems"] > 0
    assert main(["data", "stats", str(humaneval), "--format", "lcb", "--json"]) == 0
    as_lcb = json.loads(capsys.readouterr().out)
    assert (as_lcb["format"], as_lcb["problems"]) == ("lcb", 0)
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"id": "x1", "question": "add", "tests": "t"}\n')
    assert main(["data", "stats", str(unknown)]) == 2
    assert f"microcoder data stats --format NAME {unknown}" in capsys.readouterr().err

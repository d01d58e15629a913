"""report.json / report.md from judged samples: groups, `all` rows, budgets, truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from microcoder.data.formats.loaders import load_problems
from microcoder.evaluation.passk import pass_at_k
from microcoder.evaluation.report import build_report
from microcoder.evaluation.report_md import render_markdown
from microcoder.evaluation.samples import SampleRecord

MIXED = Path(__file__).parents[1] / "fixtures" / "data" / "eval_mixed.jsonl"
PASSES = {"add": 2, "rev": 0, "cnt": 1, "two": 3, "mx": 1, "sq": 0, "neg": 2, "dbl": 3}


@pytest.fixture(scope="module")
def problems():
    return load_problems(MIXED)


def rec(pid, i, budget, passed, finish="stop", tokens=10):
    return SampleRecord(
        pid,
        i,
        budget,
        "AC" if passed else "WA",
        passed,
        None if passed else 0,
        "code",
        tokens,
        finish,
    )


def records(problems, n=3, budgets=(64, 128)):
    out = []
    for p in problems:
        for i in range(n):
            ok = i < PASSES[p.id]
            out.append(rec(p.id, i, budgets[1], ok, "length" if i == 2 else "stop", 100))
            out.append(rec(p.id, i, budgets[0], ok and i == 0, "length" if i else "stop", 64))
    return out


@pytest.fixture(scope="module")
def report(problems):
    return build_report(problems, records(problems), [1, 2, 5], [64, 128])


def test_headline_is_the_mean_per_problem_pass_at_k_at_the_largest_budget(report):
    expected = sum(pass_at_k(3, c, 2) for c in PASSES.values()) / len(PASSES)
    assert report["pass_at_k"]["2"] == pytest.approx(expected)
    assert report["max_tokens"] == 128
    assert report["problems"] == 8 and report["samples_per_problem"] == 3


def test_k_above_the_samples_is_dropped_and_listed(report):
    assert report["k"] == [1, 2] and report["dropped_k"] == [5]
    assert set(report["pass_at_k"]) == {"1", "2"}


def test_one_row_per_platform_difficulty_cell_present(report):
    cells = [
        (g["platform"], g["difficulty"])
        for g in report["by_group"]
        if "all" not in (g["platform"], g["difficulty"])
    ]
    assert sorted(cells) == sorted(
        [
            ("atcoder", "easy"),
            ("atcoder", "hard"),
            ("codeforces", "medium"),
            ("leetcode", "easy"),
            ("leetcode", "medium"),
            ("leetcode", "hard"),
            ("unknown", "unknown"),
            ("humaneval", "easy"),
        ]
    )


def test_all_rows_are_the_problem_weighted_mean_of_their_cells(report):
    rows = report["by_group"]
    cells = [g for g in rows if "all" not in (g["platform"], g["difficulty"])]
    for axis, other in (("platform", "difficulty"), ("difficulty", "platform")):
        for row in (g for g in rows if g[other] == "all"):
            mine = [c for c in cells if c[axis] == row[axis]]
            assert row["problems"] == sum(c["problems"] for c in mine)
            for k in ("1", "2"):
                weighted = sum(c["pass_at_k"][k] * c["problems"] for c in mine) / row["problems"]
                assert row["pass_at_k"][k] == pytest.approx(weighted)
    assert sum(g["problems"] for g in rows if g["difficulty"] == "all") == report["problems"]


def test_each_budget_has_its_own_pass_at_k_and_truncation_rate(report):
    small, large = report["by_budget"]
    assert small["max_tokens"] == 64 and large["max_tokens"] == 128
    assert small["truncation_rate"] == pytest.approx(2 / 3)
    assert large["truncation_rate"] == pytest.approx(1 / 3)
    assert small["pass_at_k"]["1"] == pytest.approx(sum(c > 0 for c in PASSES.values()) / 3 / 8)
    assert large["pass_at_k"] == report["pass_at_k"]


def test_generations_have_one_budget_and_no_truncation_rate(problems):
    recs = [rec(p.id, 0, None, True, None, None) for p in problems]
    rep = build_report(problems, recs, [1], [None])
    assert rep["pass_at_k"] == {"1": 1.0}
    assert rep["by_budget"][0]["truncation_rate"] is None


def test_uneven_sample_counts_report_the_smallest(problems):
    recs = [rec(p.id, i, None, True) for p in problems for i in range(3 if p.id != "add" else 2)]
    assert build_report(problems, recs, [1], [None])["samples_per_problem"] == 2


def test_a_problem_without_samples_is_an_error_naming_resume(problems):
    recs = [r for r in records(problems) if r.problem_id != "neg"]
    with pytest.raises(ValueError, match="--resume"):
        build_report(problems, recs, [1], [64, 128])


def test_markdown_has_the_group_table_and_the_budget_table(report):
    md = render_markdown(report)
    assert "| platform | difficulty | problems | pass@1 64 | pass@1 128 | pass@2 64 |" in md
    assert "| **all** | **all** | 8 |" in md
    assert "| max_tokens | pass@1 | pass@2 | truncated |" in md
    assert "cut to its first B tokens" in md

"""Date window, platform and difficulty filters of `microcoder eval`."""

from __future__ import annotations

from pathlib import Path

import pytest

from microcoder.data.formats.loaders import load_problems
from microcoder.evaluation.select import parse_list, problem_day, select_problems

MIXED = Path(__file__).parents[1] / "fixtures" / "data" / "eval_mixed.jsonl"


@pytest.fixture(scope="module")
def problems():
    return load_problems(MIXED)


def ids(selection):
    return sorted(p.id for p in selection.kept)


def test_both_date_shapes_are_read():
    assert problem_day("2023-08-21T00:00:00") == "2023-08-21"
    assert problem_day("2024-08-01") == "2024-08-01"
    assert problem_day("") is None
    assert problem_day("August 2024") is None


def test_date_window_is_inclusive_at_both_ends(problems):
    sel = select_problems(problems, "2024-02-01", "2024-08-01")
    assert ids(sel) == ["mx", "rev", "sq", "two"]


def test_problems_without_a_date_are_excluded_by_a_date_filter_and_counted(problems):
    sel = select_problems(problems, date_from="2020-01-01")
    assert "neg" not in ids(sel)
    assert sel.excluded == {"undated": 1, "date": 0}
    assert "1 undated" in sel.summary(len(problems))


def test_no_filter_keeps_everything(problems):
    sel = select_problems(problems)
    assert len(sel.kept) == len(problems) and sel.excluded == {}


def test_platform_filter_is_case_insensitive(problems):
    sel = select_problems(problems, platforms=parse_list("AtCoder, humaneval"))
    assert ids(sel) == ["add", "dbl", "rev"]
    assert sel.excluded == {"platform": 5}


def test_difficulty_filter_matches_unknown_for_problems_without_one(problems):
    assert ids(select_problems(problems, difficulties=["easy"])) == ["add", "dbl", "two"]
    assert ids(select_problems(problems, difficulties=["unknown"])) == ["neg"]


def test_filters_combine(problems):
    sel = select_problems(problems, "2024-01-01", None, ["leetcode"], ["medium", "hard"])
    assert ids(sel) == ["mx", "sq"]


def test_bad_dates_and_reversed_windows_say_how_to_fix(problems):
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        select_problems(problems, date_from="2024/01/01")
    with pytest.raises(ValueError, match="swap"):
        select_problems(problems, "2024-05-01", "2024-01-01")

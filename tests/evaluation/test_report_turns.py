"""report.json / report.md of a `--max-turns` evaluation: the headline is the last turn's (the
final program), `by_turn` has pass@k after each turn next to the single-turn figure (turn 1),
and evaluation/sampling.py `turn_views` repeats the last turn's program once a trajectory
ended early."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from microcoder.data.formats.loaders import load_problems
from microcoder.evaluation.report import build_report
from microcoder.evaluation.report_md import render_markdown
from microcoder.evaluation.samples import SampleRecord
from microcoder.evaluation.sampling import turn_views
from microcoder.protocol import Response, Turn

MIXED = Path(__file__).parents[1] / "fixtures" / "data" / "eval_mixed.jsonl"


@pytest.fixture(scope="module")
def problems():
    return load_problems(MIXED)


def test_pass_after_each_turn_and_the_headline_is_the_last_turn(problems):
    """2 samples per problem: turn 1 passes on 1 of 4 problems' first sample; after turn 2 the
    first sample of every other problem passes too."""
    records = []
    for n, p in enumerate(problems[:4]):
        for i in range(2):
            first = n == 0 and i == 0
            second = i == 0
            base = SampleRecord(p.id, i, 64, "WA", False, 0, "code", 10, "stop", turn=1)
            records.append(replace(base, verdict="AC" if first else "WA", passed=first))
            records.append(replace(base, turn=2, verdict="AC" if second else "WA", passed=second))
    report = build_report(problems[:4], records, [1], [64])
    assert report["max_turns"] == 2
    assert [t["turn"] for t in report["by_turn"]] == [1, 2]
    assert report["by_turn"][0]["pass_at_k"]["1"] == pytest.approx(1 / 8)
    assert report["by_turn"][1]["pass_at_k"]["1"] == pytest.approx(4 / 8)
    assert report["pass_at_k"]["1"] == pytest.approx(4 / 8)  # the final program's
    assert report["samples_per_problem"] == 2  # turns are not samples
    md = render_markdown(report)
    assert "## pass@k after each turn (%)" in md and "| 1 (single turn) | 12.5 |" in md


def test_a_single_turn_report_has_no_turn_rows(problems):
    r = SampleRecord(problems[0].id, 0, 64, "AC", True, None, "code", 10, "stop")
    report = build_report(problems[:1], [r], [1], [64])
    assert "by_turn" not in report and "after each turn" not in render_markdown(report)


def test_turn_views_repeat_the_last_program_after_an_early_end():
    r = Response(
        response_ids=np.arange(9, dtype=np.int32),
        logprobs=np.zeros(9, np.float32),
        text="second",
        finish_reason="length",
        turns=[Turn(0, 3, text="first"), Turn(6, 9, text="second", truncated=True)],
    )
    out = turn_views(r, 16, 3)
    assert [(v["turn"], v["text"], v["tokens"]) for v in out["views"]] == [
        (1, "first", 3),
        (2, "second", 3),
        (3, "second", 3),
    ]
    assert [v["finish_reason"] for v in out["views"]] == ["stop", "length", "length"]
    assert out["tokens"] == 9 and {v["max_tokens"] for v in out["views"]} == {16}

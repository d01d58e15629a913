"""`microcoder data build` on the planted fixtures (tests/fixtures/data/build_*.jsonl, written by
make_build_fixtures.py): each stage removes its planted row, with the real sandbox, dedup and
decontamination; the report has the documented shape; a rebuild of the output removes nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from microcoder.data.corpus.build import STAGES, BuildOptions, build, cli_main
from microcoder.data.formats.loaders import load_problems

CUTOFF = "2024-12-31"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def _args(fixture_path, tmp_path, **over) -> argparse.Namespace:
    values = dict(
        sources=[fixture_path("build_site_a.jsonl"), fixture_path("build_site_b.jsonl")],
        eval_sets=[fixture_path("build_eval.jsonl")],
        cutoff_date=CUTOFF,
        near_dup_threshold=0.7,
        out=tmp_path / "out.jsonl",
        report=tmp_path / "report",
        skip_verify=False,
        verify_max=1,
        workers=2,
    )
    return argparse.Namespace(**{**values, **over})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The CLI run once on both sites + the eval set: (its folder, report.json, removals by id)."""
    tmp = tmp_path_factory.mktemp("build")
    args = _args(lambda n: str(FIXTURES / n), tmp)
    assert cli_main(args) == 0
    report = json.loads((tmp / "report" / "report.json").read_text())
    return tmp, report, {r["id"]: r for r in report["removed"]}


@pytest.mark.parametrize(
    "row, reason, match",
    [
        ("max-bad-ref", "reference_fails", None),  # a failing reference
        ("late", "after_cutoff", None),  # dated after the cutoff
        ("sum-even-copy", "duplicate", "sum-even"),  # an exact duplicate: the kept copy
        ("sum-even-other-site", "near_duplicate", "sum-even"),  # one from another site
        ("reverse-copy", "contaminated", "eval/reverse"),  # matching the eval item
    ],
)
def test_a_row_is_removed_for_its_reason_matching_what_it_copies(run, row, reason, match):
    assert run[2][row]["reason"] == reason
    if match is not None:
        assert run[2][row]["match"] == match


@pytest.mark.parametrize(
    "row",
    [
        "sum-even",  # its reference passes
        "undated",
        "increasing-run",  # a distinct problem with the same boilerplate
    ],
)
def test_a_row_is_kept(run, row):
    kept = {p.id for p in load_problems(run[0] / "out.jsonl")}
    assert row in kept


def test_an_undated_row_is_counted(run):
    assert run[1]["counts"]["undated"] == 1


def test_a_bad_row_is_reported_invalid_and_the_build_goes_on(run):
    invalid = [r for r in run[1]["removed"] if r["reason"] == "invalid"]
    assert [r["id"] for r in invalid] == ["build_site_a.jsonl:9"] and run[1]["kept"] > 0


def test_an_id_shared_by_two_sources_is_renamed_and_kept(run):
    kept = {p.id for p in load_problems(run[0] / "out.jsonl")}
    assert "site_b:increasing-run" in kept
    assert run[1]["renamed"][0]["to"] == "site_b:increasing-run"


def test_problems_without_references_are_counted(run):
    assert run[1]["counts"]["no_reference"] == 4


def test_report_json_has_the_documented_shape(run):
    report = run[1]
    assert isinstance(report["kept"], int)
    assert [s["name"] for s in report["stages"]] == list(STAGES)
    assert all({"name", "in", "out"} <= s.keys() for s in report["stages"])
    assert all({"id", "source", "reason", "match"} <= r.keys() for r in report["removed"])


def test_each_stage_feeds_the_next(run):
    stages = run[1]["stages"]
    assert all(a["out"] == b["in"] for a, b in zip(stages, stages[1:], strict=False))
    assert stages[-1]["out"] == run[1]["kept"]


def test_the_report_folder_has_markdown_and_four_histograms(run):
    names = {p.name for p in (run[0] / "report").iterdir()}
    assert {"report.md", "difficulty.png", "tests.png", "statement_length.png", "date.png"} <= names


def test_rebuilding_the_output_removes_nothing(run, tmp_path):
    out = run[0] / "out.jsonl"
    evals = [str(FIXTURES / "build_eval.jsonl")]
    again = build([str(out)], BuildOptions(eval_sets=evals, cutoff_date=CUTOFF, progress=False))
    assert again.removed == [] and len(again.kept) == run[1]["kept"]


def test_a_missing_source_file_exits_2(fixture_path, tmp_path, capsys):
    args = _args(fixture_path, tmp_path, sources=[str(tmp_path / "nope.jsonl")])
    assert cli_main(args) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_a_bad_cutoff_date_exits_2_naming_the_format(fixture_path, tmp_path, capsys):
    assert cli_main(_args(fixture_path, tmp_path, cutoff_date="31/12/2024")) == 2
    assert "YYYY-MM-DD" in capsys.readouterr().err


def test_skip_verify_marks_the_stage_skipped_and_keeps_failing_references(fixture_path):
    sources = [str(fixture_path("build_site_a.jsonl"))]
    result = build(sources, BuildOptions(verify=False, progress=False))
    stage = result.stages[STAGES.index("verify_references")]
    assert stage.skipped and "max-bad-ref" in {p.id for p in result.kept}


def test_files_one_loader_names_alike_are_told_apart_by_their_stem(tmp_path):
    row = {"kind": "stdin", "prompt": "", "tests": [{"input": "1\n", "output": "1\n"}]}
    for name, statement in (("train", "print the number you read"), ("test", "add two numbers")):
        rows = [
            {**row, "id": f"{name}{i}", "prompt": f"{statement} {i}", "source": "rllm"}
            for i in range(2)
        ]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = build(
        [str(tmp_path / "train.jsonl"), str(tmp_path / "test.jsonl")],
        BuildOptions(verify=False, progress=False),
    )
    assert {p.source for p in result.kept} == {"rllm/train", "rllm/test"}


def test_a_build_that_keeps_nothing_exits_2_naming_the_reasons(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "kind": "stdin", "tests": []}\nnot json\n')
    args = _args(lambda n: n, tmp_path, sources=[str(bad)], eval_sets=[], skip_verify=True)
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "no problem survived" in err and "2 invalid" in err and "report.md" in err

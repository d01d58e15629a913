"""`microcoder judge`: verdict JSONL, summary, exit codes and messages on bad input."""

from __future__ import annotations

import json
from pathlib import Path

from microcoder.launch.cli.main import main

DATA = Path(__file__).parent / "data"


def test_judges_every_solution_and_exits_zero(tmp_path, capsys):
    out = tmp_path / "v.jsonl"
    rc = main(
        [
            "judge",
            "--problems",
            str(DATA / "problems.jsonl"),
            "--solutions",
            str(DATA / "solutions.jsonl"),
            "--out",
            str(out),
            "--workers",
            "2",
            "--quiet",
        ]
    )
    verdicts = {r["solution_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rc == 0
    assert {k: v["verdict"] for k, v in verdicts.items()} == {
        "sum-ok": "AC",
        "sum-float": "WA",
        "sum-syntax": "CE",
        "twosum-ok": "AC",
        "twosum-none": "WA",
        "square-ok": "AC",
        "square-wrong": "WA",
    }
    assert "tests/s" in capsys.readouterr().err


def test_bad_solution_row_names_file_line_and_field(tmp_path, capsys):
    bad = tmp_path / "s.jsonl"
    bad.write_text(
        '{"problem_id": "sum", "code": "print(3)"}\n{"problem_id": "nope", "code": ""}\n'
    )
    rc = main(["judge", "--problems", str(DATA / "problems.jsonl"), "--solutions", str(bad)])
    err = capsys.readouterr().err
    assert rc != 0 and f"{bad}:2" in err and "problem_id" in err


def test_bad_problem_row_names_file_line_and_field(tmp_path, capsys):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": "x", "kind": "stdin", "tests": []}\n')
    rc = main(["judge", "--problems", str(bad), "--solutions", str(DATA / "solutions.jsonl")])
    err = capsys.readouterr().err
    assert rc != 0 and f"{bad}:1" in err and "tests" in err

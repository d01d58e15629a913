"""`microcoder data filter` end to end on the fixture with known pass rates (a rates file given,
no model): the outputs, their reproducibility, --predict-rest, and the errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from microcoder.data.difficulty.rates import measure_sample
from microcoder.data.formats.loaders import load_problems
from microcoder.launch.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
PROBLEMS = FIXTURES / "difficulty_problems.jsonl"


def run(tmp_path: Path, name: str, *extra: str, rates: Path | None = None) -> tuple[int, Path]:
    if rates is None:
        rates = tmp_path / "rates.jsonl"
        if not rates.exists():
            shutil.copy(FIXTURES / "difficulty_rates.jsonl", rates)
    out = tmp_path / name
    code = main(
        [
            "data",
            "filter",
            "--problems",
            str(PROBLEMS),
            "--rates",
            str(rates),
            "--out",
            str(out / "kept.jsonl"),
            "--report",
            str(out / "report"),
            "--keep",
            "0.0-0.8",
            "--max-unsolved-share",
            "0.2",
            *extra,
        ]
    )
    return code, out


def test_the_filter_writes_the_selection_as_our_jsonl_and_a_report(tmp_path):
    code, out = run(tmp_path, "a")
    assert code == 0
    kept = load_problems(out / "kept.jsonl")
    assert len(kept) == 10
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["kept"] == 10 and report["measured"] == 20 and report["predicted"] == 0
    assert report["removed_by_reason"] == {"always_solved": 4, "above_band": 2, "unsolved_cap": 4}
    bands = {b["band"]: (b["before"], b["after"]) for b in report["bands"]}
    assert bands["unsolved"] == (6, 2) and bands["always_solved"] == (4, 0)
    assert report["predictor_agreement"]["test"] == 5
    for png in ("pass_rate_before.png", "pass_rate_after.png"):
        assert (out / "report" / png).read_bytes()[:4] == b"\x89PNG"
    assert (out / "report" / "report.md").read_text().startswith("# Difficulty filter")


def test_the_same_seed_gives_byte_identical_outputs(tmp_path):
    _, a = run(tmp_path, "a", "--seed", "5")
    _, b = run(tmp_path, "b", "--seed", "5")
    assert (a / "kept.jsonl").read_bytes() == (b / "kept.jsonl").read_bytes()
    ra = json.loads((a / "report" / "report.json").read_text())
    rb = json.loads((b / "report" / "report.json").read_text())
    assert ra == rb


def test_predict_rest_scores_the_unmeasured_problems_from_their_metadata(tmp_path):
    sample = {p.id for p in measure_sample(load_problems(PROBLEMS), 0.5, seed=0)}
    lines = (FIXTURES / "difficulty_rates.jsonl").read_text().splitlines()
    rates = tmp_path / "partial.jsonl"
    rates.write_text("".join(x + "\n" for x in lines if json.loads(x)["id"] in sample))
    code, out = run(tmp_path, "p", "--predict-rest", "--measure-share", "0.5", rates=rates)
    report = json.loads((out / "report" / "report.json").read_text())
    assert code == 0 and report["measured"] == 10 and report["predicted"] == 10


def test_missing_rates_without_a_model_fail_saying_to_pass_one(tmp_path, capsys):
    rates = tmp_path / "partial.jsonl"
    rates.write_text((FIXTURES / "difficulty_rates.jsonl").read_text().splitlines()[0] + "\n")
    code, out = run(tmp_path, "m", rates=rates)
    assert code == 2 and "--model" in capsys.readouterr().err
    assert not (out / "kept.jsonl").exists()


def test_a_bad_band_fails_with_exit_code_2(tmp_path, capsys):
    code, _ = run(tmp_path, "b", "--keep", "0.9-0.1")
    assert code == 2 and "--keep" in capsys.readouterr().err

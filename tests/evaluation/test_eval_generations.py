"""`microcoder eval --generations`: precomputed samples judged by real Executor actors (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from microcoder.data.formats.loaders import load_problems
from microcoder.launch.cli.main import main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "data"
MIXED, HUMANEVAL = FIXTURES / "eval_mixed.jsonl", FIXTURES / "humaneval_eval.jsonl"


def write_generations(path, problems, n, corrupt=False):
    with open(path, "w") as f:
        for p in problems:
            code = p.meta["solution"]
            if corrupt:
                code = code.replace("return ", "return 1 + ")
            for i in range(n):
                text = f"Here is my solution:\n```python\n{code}```\n"
                f.write(json.dumps({"problem_id": p.id, "sample_index": i, "text": text}) + "\n")
    return path


def run_eval(tmp_path, problems_file, gens, *extra):
    out = tmp_path / "out"
    rc = main(
        [
            "eval",
            "--problems",
            str(problems_file),
            "--generations",
            str(gens),
            "--out",
            str(out),
            "--quiet",
            "--set",
            "executor.workers=1",
            *extra,
        ]
    )
    assert rc == 0
    return out, json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def humaneval():
    return load_problems(HUMANEVAL)


def test_canonical_humaneval_solutions_give_pass_at_1_of_one(ray_local, tmp_path, humaneval):
    assert all(p.meta["solution"] for p in humaneval)
    gens = write_generations(tmp_path / "g.jsonl", humaneval, 2)
    _, report = run_eval(tmp_path, HUMANEVAL, gens, "--k", "1,2")
    assert report["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert report["problems"] == len(humaneval) and report["samples_per_problem"] == 2
    assert report["max_tokens"] is None and report["verdicts"] == {"AC": 2 * len(humaneval)}


def test_a_corrupted_copy_gives_zero(ray_local, tmp_path, humaneval):
    gens = write_generations(tmp_path / "g.jsonl", humaneval, 2, corrupt=True)
    _, report = run_eval(tmp_path, HUMANEVAL, gens)
    assert report["pass_at_k"] == {"1": 0.0}


def test_truncated_thinking_replies_are_unfinished_with_pass_at_1_zero(
    ray_local, tmp_path, humaneval
):
    """As in training: a reply cut in its reasoning or final fence is not judged on the closed
    (passing) draft of its reasoning; a finished one passes."""
    with open(tmp_path / "g.jsonl", "w") as f:
        for p in humaneval:
            draft = f"<think>\nDraft:\n```python\n{p.meta['solution']}```\nCheck it"
            texts = [draft, draft + ".\n</think>\n```python\ndef ", draft + ".\n</think>\nok"]
            for i, text in enumerate(texts):
                f.write(json.dumps({"problem_id": p.id, "sample_index": i, "text": text}) + "\n")
    _, report = run_eval(
        tmp_path, HUMANEVAL, tmp_path / "g.jsonl", "--set", "prompt.reasoning=think"
    )
    n = len(humaneval)
    assert report["verdicts"] == {"RE": n, "unfinished": 2 * n}  # the answer "ok" ran: NameError
    assert report["pass_at_k"] == {"1": 0.0}


def test_mixed_kinds_reference_solutions_all_pass_and_filters_apply(ray_local, tmp_path):
    problems = load_problems(MIXED)
    gens = write_generations(tmp_path / "g.jsonl", problems, 1)
    _, report = run_eval(tmp_path, MIXED, gens, "--platform", "leetcode,atcoder")
    assert report["pass_at_k"] == {"1": 1.0}
    assert report["problems"] == 5
    assert report["selection"]["excluded"] == {"platform": 3}


def test_resume_after_a_cut_judges_only_what_is_missing(ray_local, tmp_path):
    problems = load_problems(MIXED)
    gens = write_generations(tmp_path / "g.jsonl", problems, 2)
    out, first = run_eval(tmp_path, MIXED, gens, "--set", "executor.workers=1")
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    kept = lines[: len(lines) // 2]
    (out / "samples.jsonl").write_text("".join(kept) + lines[len(kept)][:20])  # and a torn line
    _, again = run_eval(tmp_path, MIXED, gens, "--resume")
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    keys = [(r["problem_id"], r["sample_index"], r["max_tokens"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(lines)
    assert again["counts"]["resumed_records"] == len(kept)
    kept_codes = {(json.loads(x)["problem_id"], json.loads(x)["code"]) for x in kept}
    new_codes = {(r["problem_id"], r["code"]) for r in rows[len(kept) :]} - kept_codes
    assert again["counts"]["judged_programs"] == len(new_codes)
    assert again["pass_at_k"] == first["pass_at_k"] == {"1": 1.0}


def test_without_resume_an_existing_evaluation_is_not_overwritten(ray_local, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "samples.jsonl").write_text("")
    rc = main(
        [
            "eval",
            "--problems",
            str(MIXED),
            "--generations",
            str(tmp_path / "none.jsonl"),
            "--out",
            str(out),
        ]
    )
    assert rc == 2 and "--resume" in capsys.readouterr().err


def test_an_unknown_problem_id_is_an_error_with_file_and_line(tmp_path, capsys):
    gens = tmp_path / "g.jsonl"
    gens.write_text(json.dumps({"problem_id": "nope", "sample_index": 0, "code": "x"}) + "\n")
    rc = main(
        ["eval", "--problems", str(MIXED), "--generations", str(gens), "--out", str(tmp_path / "o")]
    )
    assert rc == 2 and "g.jsonl:1" in capsys.readouterr().err

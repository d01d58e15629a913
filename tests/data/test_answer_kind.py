"""The `answer` problem kind on the data side: its loader (`{"id", "question", "answer"}` rows,
data/formats/answer.py), its prompt, and the shipped tiny file (data/synthetic/arithmetic.py)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from microcoder.data.config import PromptConfig
from microcoder.data.formats.loaders import detect_format, load_problems
from microcoder.data.problem import ProblemFormatError
from microcoder.data.prompting.render import render_messages
from microcoder.data.prompting.templates import ANSWER_SYSTEM
from microcoder.data.synthetic import arithmetic as synthetic_answer
from microcoder.sandbox.rewards.answer import exact_answer

SHIPPED = Path(__file__).parents[2] / "configs" / "answer-tiny.jsonl"


def write(tmp_path, rows) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_answer_rows_load_as_answer_problems(tmp_path):
    rows = [
        {"id": 1, "question": "1 + 1?", "answer": 2, "source": "mine", "level": 3},
        {"id": "b", "question": "Half of 1?", "answer": "1/2"},
    ]
    assert detect_format(rows[0]) == "answer"
    got = load_problems(write(tmp_path, rows))
    assert [(p.id, p.kind, p.prompt, p.tests) for p in got] == [
        ("1", "answer", "1 + 1?", [{"input": "", "output": "2"}]),
        ("b", "answer", "Half of 1?", [{"input": "", "output": "1/2"}]),
    ]
    assert got[0].source == "mine" and got[0].meta == {"level": 3}


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"id": "a", "question": "q?", "answer": ""}, "answer"),
        ({"id": "a", "question": "q?", "answer": True}, "answer"),
        ({"id": "a", "question": 3, "answer": "1"}, "question"),
    ],
)
def test_a_bad_answer_row_is_named_by_file_line_and_field(tmp_path, row, field):
    with pytest.raises(ProblemFormatError, match=rf"answers.jsonl:1: field '{field}'"):
        load_problems(write(tmp_path, [row]), format="answer")


def test_the_prompt_asks_for_a_boxed_answer_in_both_templates():
    problem = load_problems(SHIPPED)[0]
    for template in ("default", "lcb"):
        messages = render_messages(problem, PromptConfig(template=template))
        assert messages == [
            {"role": "system", "content": ANSWER_SYSTEM},
            {"role": "user", "content": problem.prompt},
        ]
    assert "\\boxed{" in ANSWER_SYSTEM


def test_the_shipped_file_is_the_generators_output_and_its_answers_score_1():
    rows = [json.loads(line) for line in SHIPPED.read_text().splitlines()]
    assert rows == synthetic_answer.rows() and len(rows) == 40
    assert synthetic_answer.rows(seed=1) != rows  # the seed matters
    problems = load_problems(SHIPPED)
    assert {p.kind for p in problems} == {"answer"}
    for p in problems:  # the expected answer, boxed or as a decimal, is right
        assert exact_answer(p, f"\\boxed{{{p.tests[0]['output']}}}")[0] == 1.0
    fractions = [p for p in problems if "/" in p.tests[0]["output"]]
    decimals = [(p, str(float(Fraction(p.tests[0]["output"])))) for p in fractions]
    exact = [(p, d) for p, d in decimals if len(d) < 6]  # "1/4" -> "0.25", not 1/3
    assert exact and all(exact_answer(p, d)[0] == 1.0 for p, d in exact)

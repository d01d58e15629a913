"""Reading precomputed generations (`microcoder eval --generations FILE`)."""

from __future__ import annotations

import json

import pytest

from microcoder.data.problem import ProblemFormatError
from microcoder.evaluation.generations import read_generations

IDS = {"a", "b"}


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_text_is_extracted_as_in_training_and_code_is_used_as_is(tmp_path):
    path = write(
        tmp_path / "g.jsonl",
        [
            {
                "problem_id": "a",
                "sample_index": 0,
                "text": "Sure:\n```python\nprint(1)\n```\nDone.",
            },
            {"problem_id": "a", "sample_index": 1, "code": "```python\nkept as is\n```"},
            {"problem_id": "b", "sample_index": 0, "text": "   "},
            {"problem_id": "b", "sample_index": 1, "code": None},
        ],
    )
    gens = read_generations(path, IDS)
    assert [g.code for g in gens] == ["print(1)\n", "```python\nkept as is\n```", None, None]


def test_livecodebench_output_rows_give_one_sample_per_code(tmp_path):
    path = tmp_path / "lcb.json"
    path.write_text(json.dumps([{"question_id": "a", "code_list": ["x = 1", "y = 2"]}]))
    gens = read_generations(path, IDS)
    assert [(g.problem_id, g.sample_index, g.code) for g in gens] == [
        ("a", 0, "x = 1"),
        ("a", 1, "y = 2"),
    ]


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"problem_id": "zz", "sample_index": 0, "code": "x"}, "problem_id"),
        ({"problem_id": "a", "code": "x"}, "sample_index"),
        ({"problem_id": "a", "sample_index": 0}, "text"),
        ("{not json", "<row>"),
    ],
)
def test_a_bad_line_is_an_error_naming_file_line_and_field(tmp_path, row, field):
    path = write(tmp_path / "g.jsonl", [{"problem_id": "a", "sample_index": 0, "code": "x"}, row])
    with pytest.raises(ProblemFormatError, match=r"g\.jsonl:2") as info:
        read_generations(path, IDS)
    assert info.value.field_name == field


def test_a_repeated_sample_index_names_the_first_line(tmp_path):
    row = {"problem_id": "a", "sample_index": 0, "code": "x"}
    path = write(tmp_path / "g.jsonl", [row, row])
    with pytest.raises(ProblemFormatError, match="line 1"):
        read_generations(path, IDS)


def test_a_text_cut_in_its_reasoning_or_final_fence_is_unfinished(tmp_path):
    draft = "<think>\n```python\nprint(1)\n```\n"
    rows = [
        {"problem_id": "a", "sample_index": 0, "text": draft},
        {"problem_id": "a", "sample_index": 1, "text": draft + "</think>\n```python\nprint("},
        {"problem_id": "a", "sample_index": 2, "text": draft + "</think>\n```py\nprint(2)\n```"},
    ]
    for reasoning in ("think", "auto"):
        gens = read_generations(write(tmp_path / "g.jsonl", rows), IDS, reasoning)
        assert [g.code for g in gens] == [None, None, "print(2)\n"]
        assert [bool(g.unfinished) for g in gens] == [True, True, False]


def test_text_is_extracted_in_the_problems_language(tmp_path):
    text = "```cpp\nint main() {}\n```\nor in Python:\n```python\nprint(1)\n```\n"
    path = write(
        tmp_path / "g.jsonl", [{"problem_id": p, "sample_index": 0, "text": text} for p in "ab"]
    )
    gens = read_generations(path, IDS, languages={"a": "cpp"})
    assert [g.code for g in gens] == ["int main() {}\n", "print(1)\n"]

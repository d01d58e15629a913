import gzip
import shutil

import pytest

from microcoder.data.loaders import detect_format, load_problems
from microcoder.data.problem import ProblemFormatError


def test_own_jsonl_loads_every_kind(fixture_path):
    problems = load_problems(fixture_path("own.jsonl"))
    assert [(p.id, p.kind) for p in problems] == [
        ("add", "stdin"),
        ("sq", "functional"),
        ("neg", "assert"),
    ]
    assert problems[0].time_limit_s == 2 and problems[1].fn_name == "sq"


def test_gz_file_reads_like_the_plain_file(fixture_path, tmp_path):
    gz = tmp_path / "own.jsonl.gz"
    with open(fixture_path("own.jsonl"), "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert load_problems(gz) == load_problems(fixture_path("own.jsonl"))


def test_strict_error_names_file_line_and_field(fixture_path):
    with pytest.raises(ProblemFormatError) as err:
        load_problems(fixture_path("own_bad.jsonl"))
    assert err.value.line == 2 and err.value.field_name == "kind"
    assert "own_bad.jsonl:2" in str(err.value)


def test_lenient_mode_collects_every_reject_with_its_reason(fixture_path):
    result = load_problems(fixture_path("own_bad.jsonl"), strict=False)
    assert [p.id for p in result.problems] == ["add"]
    assert [(r.line, r.field) for r in result.rejects] == [(2, "kind"), (3, "<json>"), (4, "tests")]


def test_duplicate_ids_are_rejected(tmp_path, fixture_path):
    path = tmp_path / "dup.jsonl"
    line = fixture_path("own.jsonl").read_text().splitlines()[0]
    path.write_text(f"{line}\n{line}\n")
    result = load_problems(path, strict=False)
    assert len(result.problems) == 1 and result.rejects[0].field == "id"


def test_unknown_rows_ask_for_an_explicit_format(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"foo": 1}\n')
    with pytest.raises(ProblemFormatError, match="pass format="):
        load_problems(path)


def test_unknown_format_name_lists_the_choices(fixture_path):
    with pytest.raises(ValueError, match="leetcodedataset"):
        load_problems(fixture_path("own.jsonl"), format="nope")


def test_detect_format_recognises_each_fixture(fixture_path):
    import json

    expected = {
        "own.jsonl": "jsonl",
        "lcb.jsonl": "lcb",
        "humaneval.jsonl": "humaneval",
        "leetcodedataset.jsonl": "leetcodedataset",
        "apps.jsonl": "apps",
    }
    for name, fmt in expected.items():
        first = json.loads(fixture_path(name).read_text().splitlines()[0])
        assert detect_format(first) == fmt, name
    assert detect_format(json.loads(fixture_path("rllm.json").read_text())[0]) == "rllm"

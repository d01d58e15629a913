import gzip
import shutil

import pytest

from microcoder.data.formats.loaders import detect_format, load_problems
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
    with pytest.raises(ProblemFormatError, match="data.format = one of"):
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


def test_every_data_format_a_config_accepts_is_one_the_loader_knows(fixture_path):
    import typing

    from microcoder.data.config import DataConfig
    from microcoder.data.formats.loaders import FORMAT_CHOICES

    accepted = typing.get_args(DataConfig.model_fields["format"].annotation)
    assert set(accepted) == set(FORMAT_CHOICES)


def test_a_runs_livecodebench_format_name_loads_lcb_rows(fixture_path, tmp_path):
    from microcoder.data.config import DataConfig
    from microcoder.data.sources import load_run_problems

    good = tmp_path / "lcb.jsonl"  # the fixture's first row (it has bad rows further down)
    good.write_text(fixture_path("lcb.jsonl").read_text().splitlines()[0] + "\n")
    data = DataConfig(source=str(good), format="livecodebench")
    assert len(load_run_problems(data, seed=0)) == 1


def test_a_file_whose_rows_are_all_unreadable_names_the_first_bad_line(tmp_path):
    """Format detection skips unreadable rows; when none can be read, the error is the first
    row's (file:line and why), not "no rows"."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "statement": "x"\nnot json\n')
    with pytest.raises(ProblemFormatError, match="not valid JSON") as info:
        load_problems(bad)
    assert info.value.line == 1


def test_an_unknown_format_name_names_the_nearest_format(fixture_path):
    from microcoder.data.formats.loaders import load_problems

    with pytest.raises(ValueError, match="did you mean 'leetcodedataset'"):
        load_problems(fixture_path("lcb.jsonl"), format="leetcod")

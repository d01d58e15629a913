"""samples.jsonl: append, read back for --resume, torn last lines."""

from __future__ import annotations

import json

import pytest

from microcoder.evaluation.samples import SampleRecord, SamplesWriter, read_samples


def rec(i, budget=64):
    return SampleRecord("p", i, budget, "AC", True, None, "print(1)", 5, "stop", 1, 1)


def test_records_round_trip_with_every_field(tmp_path):
    w = SamplesWriter(tmp_path / "s.jsonl")
    w.append([rec(0), rec(1, None)])
    w.close()
    back, size = read_samples(tmp_path / "s.jsonl")
    assert back == [rec(0), rec(1, None)]
    assert size == (tmp_path / "s.jsonl").stat().st_size
    row = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])
    assert {
        "problem_id",
        "sample_index",
        "max_tokens",
        "verdict",
        "passed",
        "first_failed",
        "code",
        "tokens",
        "finish_reason",
    } <= row.keys()


def test_a_torn_last_line_is_left_out_and_cut_before_appending(tmp_path):
    path = tmp_path / "s.jsonl"
    w = SamplesWriter(path)
    w.append([rec(0), rec(1)])
    w.close()
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 7])  # the second line loses its end
    back, size = read_samples(path)
    assert [r.sample_index for r in back] == [0]
    w = SamplesWriter(path, keep_bytes=size)
    w.append([rec(2)])
    w.close()
    assert [r.sample_index for r in read_samples(path)[0]] == [0, 2]


def test_a_bad_line_in_the_middle_names_file_and_line(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(rec(0).to_json() + "\n{oops\n" + rec(1).to_json() + "\n")
    with pytest.raises(ValueError, match=r"s\.jsonl:2"):
        read_samples(path)


def test_a_fresh_writer_starts_an_empty_file(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(rec(0).to_json() + "\n")
    SamplesWriter(path).close()
    assert path.read_text() == ""

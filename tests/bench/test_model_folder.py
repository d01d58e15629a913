"""bench/model_folder.py: the model a bench runs on (bench eval, generation, learner)."""

from __future__ import annotations

import argparse

import pytest

from microcoder.bench.model_folder import add_model_argument, model_folder


def _complete(folder):
    folder.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (folder / name).write_text("{}")
    return folder


def test_a_given_folder_is_used_as_it_is(tmp_path):
    given = tmp_path / "m"
    given.mkdir()
    (given / "config.json").write_text("{}")
    assert model_folder(str(given), ("nowhere",), tmp_path) == str(given)


def test_a_given_folder_without_a_model_stops_naming_it(tmp_path):
    with pytest.raises(SystemExit, match="--model .*empty: no model folder there"):
        model_folder(str(tmp_path / "empty"), (), tmp_path)


def test_the_first_usual_folder_with_a_complete_model_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "half").mkdir(parents=True)
    (tmp_path / "runs" / "half" / "config.json").write_text("{}")  # no weights, no tokenizer
    _complete(tmp_path / "runs" / "warm")
    _complete(tmp_path / "runs" / "cold")
    usual = ("runs/half", "runs/warm", "runs/cold")
    assert model_folder("", usual, tmp_path) == str(tmp_path / "runs" / "warm")


def test_the_help_names_the_folders_in_the_order_they_are_tried():
    parser = argparse.ArgumentParser()
    add_model_argument(parser, ("runs/a", "runs/b"))
    text = " ".join(parser.format_help().split())
    assert "(default runs/a, else runs/b, else a tiny model built in a temp folder)" in text
    assert parser.parse_args([]).model == ""

"""`microcoder status` and `microcoder scale` pick the same default run (launch/run_dirs.py
`newest_run`): the one written to last, counting a run that just started (config.toml, no
metrics.jsonl yet)."""

from __future__ import annotations

import json
import os
import time

import pytest

from microcoder.launch.cli.main import main
from microcoder.launch.run_dirs import newest_run


def write(path, text: str, age_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (time.time() - age_s,) * 2)


def status_pick(capsys) -> str:
    assert main(["status", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["run"]


def scale_pick(root) -> str:
    """The run `scale` sent its request to (nobody answers here, so it times out)."""
    with pytest.raises(TimeoutError):
        main(["scale", "generators", "2", "--timeout", "0.3"])
    (req,) = root.glob("*/control/req-*.json")
    return req.parent.parent.name


def test_a_just_started_run_without_metrics_is_the_newest(tmp_path):
    write(tmp_path / "old" / "config.toml", "max_steps = 5\n", age_s=100)
    write(tmp_path / "old" / "metrics.jsonl", "", age_s=90)
    write(tmp_path / "new" / "config.toml", "max_steps = 5\n", age_s=1)
    assert newest_run(tmp_path).name == "new"


def test_a_run_still_writing_metrics_beats_one_started_later_that_stopped(tmp_path):
    write(tmp_path / "long" / "config.toml", "max_steps = 500\n", age_s=1000)
    write(tmp_path / "long" / "metrics.jsonl", "", age_s=1)
    write(tmp_path / "short" / "config.toml", "max_steps = 5\n", age_s=500)
    write(tmp_path / "short" / "metrics.jsonl", "", age_s=400)
    assert newest_run(tmp_path).name == "long"


def test_folders_without_run_files_are_not_runs(tmp_path):
    write(tmp_path / "tiny-model" / "config.json", "{}", age_s=0)
    assert newest_run(tmp_path) is None
    assert newest_run(tmp_path / "missing") is None


def test_status_and_scale_pick_the_same_just_started_run(tmp_path, capsys, monkeypatch):
    runs = tmp_path / "runs"
    write(runs / "older" / "config.toml", "max_steps = 5\n", age_s=100)
    write(runs / "older" / "metrics.jsonl", "", age_s=50)
    write(runs / "started" / "config.toml", "max_steps = 5\n", age_s=1)
    monkeypatch.chdir(tmp_path)
    assert status_pick(capsys) == "started"
    assert scale_pick(runs) == "started"


def test_scale_without_any_run_says_to_pass_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="pass --run DIR"):
        main(["scale", "generators", "2"])

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


@pytest.mark.parametrize(
    "files, newest",
    [
        (  # a just-started run without metrics is the newest
            [
                ("old/config.toml", 5, 100),
                ("old/metrics.jsonl", None, 90),
                ("new/config.toml", 5, 1),
            ],
            "new",
        ),
        (  # a run still writing metrics beats one started later that stopped
            [
                ("long/config.toml", 500, 1000),
                ("long/metrics.jsonl", None, 1),
                ("short/config.toml", 5, 500),
                ("short/metrics.jsonl", None, 400),
            ],
            "long",
        ),
    ],
)
def test_the_newest_run_is_the_one_written_to_last(tmp_path, files, newest):
    """`files`: (path, max_steps of a config.toml or None for an empty metrics.jsonl, age in s)."""
    for path, max_steps, age_s in files:
        text = "" if max_steps is None else f"max_steps = {max_steps}\n"
        write(tmp_path / path, text, age_s=age_s)
    assert newest_run(tmp_path).name == newest


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

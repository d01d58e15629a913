"""The shared-path rule of a joined cluster (launch/run/shared_paths.py): the run directory, the
model folder, a data file and buffer.keys_dir lie under cluster.shared_dir, or the launch stops
at start naming the path and what to set; a local run is not checked."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest

from microcoder.launch.config import load_config
from microcoder.launch.run.shared_paths import shared_path_errors

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.toml"


def joined(shared: Path | None, *overrides: str):
    sets = ['cluster.address="10.0.0.7:6379"', *overrides]
    if shared is not None:
        sets.append(f'cluster.shared_dir="{shared}"')
    return load_config(TINY, sets)


def test_a_local_run_is_not_checked(tmp_path):
    assert shared_path_errors(load_config(TINY), tmp_path / "run", "/elsewhere/model") == []


def test_a_joined_run_without_a_shared_dir_is_told_to_declare_one(tmp_path):
    errors = shared_path_errors(joined(None), tmp_path / "run", str(tmp_path / "model"))
    assert len(errors) == 1 and "needs cluster.shared_dir" in errors[0]
    assert 'set cluster.shared_dir = "/path/to/shared"' in errors[0]


def test_paths_under_the_shared_dir_keep_the_rule(tmp_path):
    cfg = joined(
        tmp_path, f'buffer.keys_dir="{tmp_path}/keys"', f'data.source="{tmp_path}/p.jsonl"'
    )
    assert shared_path_errors(cfg, tmp_path / "run", str(tmp_path / "model")) == []


def test_a_run_directory_outside_the_shared_dir_is_named(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    errors = shared_path_errors(joined(shared), tmp_path / "run", str(shared / "model"))
    assert len(errors) == 1
    assert f"run directory (--run-dir / run_dir) = {tmp_path / 'run'} is not under" in errors[0]


def test_a_model_folder_outside_the_shared_dir_is_named(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    errors = shared_path_errors(joined(shared), shared / "run", str(tmp_path / "model"))
    assert len(errors) == 1 and f"model.path = {tmp_path / 'model'}" in errors[0]
    assert f"move it under {shared}" in errors[0]


def test_a_relative_path_is_checked_where_it_resolves(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.chdir(tmp_path)
    errors = shared_path_errors(joined(shared), shared / "run", "runs/tiny-model")
    assert len(errors) == 1 and f"model.path = {tmp_path / 'runs/tiny-model'}" in errors[0]


def test_a_keys_folder_and_a_data_file_outside_the_shared_dir_are_named(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    cfg = joined(shared, 'buffer.keys_dir="/keys"', 'data.source="/data/p.jsonl"')
    errors = shared_path_errors(cfg, shared / "run", str(shared / "model"))
    assert [e.split(" = ")[0] for e in errors] == ["buffer.keys_dir", "data.source"]


def test_a_keys_folder_is_not_checked_when_curve_is_off(tmp_path):
    cfg = joined(tmp_path, 'buffer.keys_dir="/keys"', "buffer.curve=false")
    assert shared_path_errors(cfg, tmp_path / "run", str(tmp_path / "model")) == []


def test_a_shared_dir_that_is_not_a_folder_is_an_error(tmp_path):
    errors = shared_path_errors(joined(tmp_path / "nope"), tmp_path / "run", str(tmp_path))
    assert errors and "is not a folder here" in errors[0]


def test_a_joined_launch_that_breaks_the_rule_stops_at_start_before_ray(
    tmp_path, capsys, monkeypatch
):
    from microcoder.launch.run.cluster import Run
    from microcoder.launch.run.command import launch

    # The suite's session Ray may be up in this process: ask whether *this* launch starts one.
    monkeypatch.setattr(Run, "start_ray", lambda *a, **k: pytest.fail("the launch started Ray"))

    shared = tmp_path / "shared"
    shared.mkdir()
    cfg = joined(shared, f'model.path="{tmp_path}/model"')
    args = Namespace(resume=None, run_dir=str(shared / "run"))
    assert launch(cfg, args) == 2
    out = capsys.readouterr().out
    assert f"launch: model.path = {tmp_path / 'model'} is not under cluster.shared_dir" in out
    assert not (shared / "run" / "config.toml").exists()

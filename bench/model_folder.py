"""The model a bench runs on: `--model FOLDER`, else the first of the bench's usual folders that
holds a complete tiny model, else a tiny model built in a temp folder. Standard library only at
the top (a bench's `add_arguments` runs for `microcoder --help`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from microcoder.learner.models.tiny_model import build_tiny_model, is_tiny_model_dir

BUILT = "a tiny model built in a temp folder"


def add_model_argument(parser: argparse.ArgumentParser, usual: tuple[str, ...] = ()) -> None:
    """`--model FOLDER` (default ''), its help naming where `model_folder` looks instead."""
    parser.add_argument(
        "--model", default="", help=f"model folder (default {', else '.join((*usual, BUILT))})"
    )


def model_folder(given: str, usual: tuple[str, ...], tmp: str | Path) -> str:
    """`given` when set (it must hold a config.json), else the first folder of `usual` that holds
    a complete tiny model (absolute), else a tiny model built under `tmp` (seed 0)."""

    if given:
        if not Path(given, "config.json").is_file():
            raise SystemExit(f"--model {given}: no model folder there (no config.json)")
        return given
    for folder in usual:
        if is_tiny_model_dir(folder):
            return str(Path(folder).resolve())
    return str(build_tiny_model(Path(tmp) / "tiny-model", seed=0))

"""No folder of the product is a flat heap: at most 20 modules each (issue 36), and every inner
room says in its docstring what it owns and what it may import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PRODUCT = ("actors", "bench", "buffer", "data", "evaluation", "launch", "learner", "sandbox")
LIMIT = 20


def folders() -> list[Path]:
    out = []
    for top in PRODUCT:
        out += [p.parent for p in (ROOT / top).rglob("__init__.py")]
    return sorted(set(out))


def modules(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")


def test_the_walk_finds_the_inner_rooms():
    names = {str(f.relative_to(ROOT)) for f in folders()}
    assert {"launch/cli", "launch/run", "data/formats", "learner/algorithm"} <= names


@pytest.mark.parametrize("folder", folders(), ids=lambda f: str(f.relative_to(ROOT)))
def test_no_folder_holds_more_than_twenty_modules(folder):
    assert len(modules(folder)) <= LIMIT, modules(folder)


@pytest.mark.parametrize("folder", folders(), ids=lambda f: str(f.relative_to(ROOT)))
def test_every_room_says_what_it_owns(folder):
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
    assert doc and len(doc.split()) >= 8, f"{folder / '__init__.py'}: say what the room owns"

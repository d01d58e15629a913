"""No module of the weight path reaches into another module's `_private` names (issue 46): what
two modules share is public surface, named and documented where it is defined.

Scoped to actors/, learner/sync/ and the bench modules that drive the weight transports. Read
from the source: every `from X import _name` (also inside functions) and every `X._name` where
`X` is a module this file imported (`import a.b as X`, `from a import b as X`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCOPE = ("actors", "learner/sync", "bench/weight_sync.py", "bench/weight_relay.py")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(node: ast.ImportFrom) -> bool:
    return node.level > 0 or (node.module or "").startswith("microcoder")


def files() -> list[Path]:
    out: list[Path] = []
    for part in SCOPE:
        p = ROOT / part
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def reaches(path: Path) -> list[str]:
    """Where `path` takes a private name from another module."""
    return [f"{path.relative_to(ROOT)}:{f}" for f in _found(path)]


def _reaches_in(path: Path) -> list[str]:
    return [f"{path.name}:{f}" for f in _found(path)]


def _found(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()  # local names bound to a module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("microcoder"):
                    modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if _private(a.name) and _ours(node):
                    found.append(f"{node.lineno}: from {node.module} import {a.name}")
                elif node.module and node.module.startswith("microcoder"):
                    modules.add(a.asname or a.name)  # may be a module (from pkg import mod)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_takes_another_modules_private_names():
    assert [r for f in files() for r in reaches(f)] == []


def test_the_walk_sees_both_forms(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "import microcoder.x as t\ndef g():\n    from microcoder.y import _z, ok\n    return t._w\n"
    )
    found = [r.split(":", 1)[1] for r in _reaches_in(f)]
    assert found == ["3: from microcoder.y import _z", "4: t._w"]

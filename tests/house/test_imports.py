"""Imports point down: low packages never import the ones above them (docs/architecture.md);
actors/ and evaluation/ never import launch/ (they receive their config sections).

Read from the source (every import statement, also those inside functions), so a lazy import
that would only fail at run time is caught too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
RULES = {
    "buffer": ("torch", "vllm", "microcoder.launch", "microcoder.actors"),
    "sandbox": ("torch", "vllm", "microcoder.launch", "microcoder.actors"),
    "learner": ("vllm", "microcoder.launch", "microcoder.actors"),
    "data": ("microcoder.launch", "microcoder.actors"),
    "actors": ("microcoder.launch",),
    "evaluation": ("microcoder.launch",),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def violations(package: str) -> list[str]:
    banned = RULES[package]
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imported_modules(path):
            if any(module == b or module.startswith(b + ".") for b in banned):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


@pytest.mark.parametrize("package", sorted(RULES))
def test_package_imports_only_what_lies_below_it(package):
    assert violations(package) == []


def test_the_walk_sees_lazy_imports_inside_functions(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from microcoder.launch.config import Config\n")
    assert imported_modules(f) == [(2, "microcoder.launch.config")]

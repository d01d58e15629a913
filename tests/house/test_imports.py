"""Imports point down: low packages never import the ones above them (docs/architecture.md);
actors/ and evaluation/ never import launch/ (they receive their config sections); the inner
rooms of actors/, data/, learner/ and launch/ keep to what their __init__.py says.

Read from the source (every import statement, also those inside functions), so a lazy import
that would only fail at run time is caught too."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
RULES = {
    "buffer": ("torch", "vllm", "microcoder.launch", "microcoder.actors"),
    "sandbox": ("torch", "vllm", "microcoder.launch", "microcoder.actors"),
    "learner": ("vllm", "microcoder.launch", "microcoder.actors"),
    "data": ("microcoder.launch", "microcoder.actors", "microcoder.sandbox"),
    "actors": ("microcoder.launch",),
    "evaluation": ("microcoder.launch",),
    # the inner rooms (issue 36; docs/architecture.md §1, each room's __init__.py)
    "actors/engines": (
        "microcoder.launch",
        *(f"microcoder.actors.{m}" for m in ("generator", "executor", "learner_rank", "stream")),
    ),
    "actors/environments": (
        "microcoder.launch",
        "microcoder.learner",
        "torch",
        "vllm",
        *(f"microcoder.actors.{m}" for m in ("generator", "executor", "learner_rank", "engines")),
    ),
    "actors/weights": (
        "microcoder.launch",
        *(f"microcoder.actors.{m}" for m in ("generator", "executor", "learner_rank")),
    ),
    "sandbox/rewards": (
        *(
            f"microcoder.sandbox.{m}"
            for m in ("pool", "worker", "forkserver", "childproc", "grade")
        ),
    ),
    "data/formats": (
        "microcoder.sandbox",
        *(f"microcoder.data.{r}" for r in ("prompting", "corpus", "difficulty", "synthetic")),
    ),
    "data/prompting": ("microcoder.data.corpus", "microcoder.data.difficulty"),
    "data/corpus": ("microcoder.data.prompting", "microcoder.data.difficulty"),
    "data/difficulty": ("microcoder.sandbox", "microcoder.data.prompting"),
    "data/synthetic": (
        "microcoder.sandbox",
        *(f"microcoder.data.{r}" for r in ("formats", "prompting", "corpus", "difficulty")),
    ),
    "learner/algorithm": ("microcoder.learner", "transformers"),
    "learner/models": ("microcoder.launch", "microcoder.actors"),
    "learner/warmstart": ("microcoder.learner.trainer",),
    "learner/sync": ("microcoder.learner", "microcoder.data", "transformers", "vllm"),
    "launch/run": ("microcoder.launch.cli", "microcoder.launch.compare", "microcoder.launch.jobs"),
    "launch/monitor": (*(f"microcoder.launch.{r}" for r in ("run", "cli", "compare", "jobs")),),
    "launch/compare": ("microcoder.actors", "microcoder.launch.cli", "microcoder.launch.jobs"),
    "launch/jobs": ("microcoder.launch.cli", "microcoder.launch.compare"),
}
# an inner room may always import itself (learner/algorithm bans the rest of learner/)
ALLOWED = {
    # docs/architecture.md §1, data/'s row: sandbox/ only inside the functions that judge the
    # references (sandbox/ imports data/problem.py at load: a module-level import is a cycle)
    ("data/corpus/verify.py", "microcoder.sandbox"),
    ("data/corpus/build.py", "microcoder.sandbox"),
}
"""(file, banned package) pairs the table states as exceptions: only inside functions there."""


def imported_modules(path: Path, top_level: bool = False) -> list[tuple[int, str]]:
    """(line, module) of every import statement of `path`; `top_level`: only those run when the
    module loads (not inside a function)."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    nodes = ast.walk(tree) if not top_level else _top_level(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _top_level(tree: ast.AST):
    """The nodes of `tree` outside function bodies."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def violations(package: str) -> list[str]:
    banned = RULES[package]
    own = "microcoder." + package.replace("/", ".")
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imported_modules(path):
            if module == own or module.startswith(own + "."):
                continue
            hit = [b for b in banned if module == b or module.startswith(b + ".")]
            rel = path.relative_to(ROOT).as_posix()
            if hit and (rel, hit[0]) in ALLOWED:
                if (line, module) in imported_modules(path, top_level=True):
                    found.append(f"{rel}:{line} imports {module} at load (only inside functions)")
                continue
            if hit:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


@pytest.mark.parametrize("package", sorted(RULES))
def test_package_imports_only_what_lies_below_it(package):
    assert violations(package) == []


def test_the_walk_sees_lazy_imports_inside_functions(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from microcoder.launch.config import Config\n")
    assert imported_modules(f) == [(2, "microcoder.launch.config")]


def test_data_imports_sandbox_only_where_the_table_says(tmp_path, monkeypatch):
    """data/ lies below sandbox/: data/config.py and data/prompting/reasoning.py once imported
    sandbox/extract.py's check_reasoning (now data/prompting/reasoning.py's)."""
    (tmp_path / "data" / "prompting").mkdir(parents=True)
    (tmp_path / "data" / "corpus").mkdir(parents=True)
    lazy = "def f():\n    from microcoder.sandbox.extract import check_reasoning\n"
    (tmp_path / "data" / "prompting" / "reasoning.py").write_text(lazy)
    (tmp_path / "data" / "corpus" / "verify.py").write_text(lazy)
    (tmp_path / "data" / "corpus" / "build.py").write_text("from microcoder.sandbox import X\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert violations("data") == [
        "data/corpus/build.py:1 imports microcoder.sandbox at load (only inside functions)",
        "data/prompting/reasoning.py:2 imports microcoder.sandbox.extract",
    ]

"""Small habits of the product code (issue 46 item 6), counted from the source with the AST.

- Imports sit at the head of the file: at most 20 % of the import statements of the product
  package (not tests/) may stand inside a function. One stays inside a function only where a heavy
  import rides on it (torch, transformers, vllm, ray, numpy, pydantic on the `microcoder --help`
  path, an optional package) or where hoisting it would close an import cycle.
- One assignment per line: no packed assignment of attributes from a literal tuple
  (`self.a, self.b = a, b`); tuple unpacking of a call's result and swaps stay allowed."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
MAX_IMPORTS_IN_FUNCTIONS = 0.20


def product_files() -> list[Path]:
    """Every .py file of the installed package (pyproject's package-dir: microcoder/, actors/, ...)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = pyproject["tool"]["setuptools"]["package-dir"].values()
    return sorted(f for folder in folders for f in (ROOT / folder).rglob("*.py"))


def import_placement(tree: ast.AST) -> tuple[int, int]:
    """(import statements, of which inside a function) of one module."""
    total = inside = 0

    def walk(node: ast.AST, in_function: bool) -> None:
        nonlocal total, inside
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                total += 1
                inside += in_function
            function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            walk(child, in_function or function)

    walk(tree, False)
    return total, inside


def packed_attribute_assignments(tree: ast.AST) -> list[int]:
    """Lines of `x.a, y.b = v, w`: attribute targets packed with a literal tuple of as many values."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if (
            isinstance(target, ast.Tuple | ast.List)
            and isinstance(value, ast.Tuple | ast.List)
            and len(target.elts) == len(value.elts)
            and all(isinstance(t, ast.Attribute) for t in target.elts)
        ):
            found.append(node.lineno)
    return found


def test_at_most_a_fifth_of_the_imports_stand_inside_functions():
    total = inside = 0
    per_file = {}
    for path in product_files():
        t, i = import_placement(ast.parse(path.read_text(), str(path)))
        total += t
        inside += i
        if i:
            per_file[str(path.relative_to(ROOT))] = i
    most = sorted(per_file.items(), key=lambda kv: -kv[1])[:15]
    assert inside / total <= MAX_IMPORTS_IN_FUNCTIONS, (
        f"{inside} of {total} imports ({inside / total:.1%}) stand inside functions; "
        f"the most in: {most}"
    )


def test_no_packed_attribute_assignments_of_literal_tuples():
    found = []
    for path in product_files():
        lines = packed_attribute_assignments(ast.parse(path.read_text(), str(path)))
        found += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert found == []


def test_the_counters_see_what_they_count():
    tree = ast.parse(
        "import os\n"
        "def f():\n"
        "    import json\n"
        "    self.a, self.b = 1, 2\n"
        "    a, b = g()\n"
        "    a, b = b, a\n"
        "class C:\n"
        "    def m(self):\n"
        "        from x import y\n"
    )
    assert import_placement(tree) == (3, 2)
    assert packed_attribute_assignments(tree) == [4]

"""Every code reference in docs/*.md names something that exists: a `path.py` is a file of the
tree, and a `path.py: name` / `path.py: Class.method` (the docs' format, with or without
backticks: "`launch/run/cluster.py: Run.start_ray`", "launch/run/problems.py: `load_run_problems`",
"`microcoder/config.py`: `Section`", "launch/run/supervisor.py `apply_control`") is defined in that
file (at top level, or in a top-level class: a method may be named with or without its class).
A rename that leaves a doc behind fails here with the stale name.

Only paths under the repository's own top-level folders are ours: `vllm/v1/worker/gpu_worker.py`
names vLLM's source and is left alone. `path.py:N` line references are dated ("lines as of
commit ...") and are only checked as paths.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
IDENT = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
REF = re.compile(
    r"(?<![\w./-])(?P<path>(?:[\w-]+/)+[\w-]+\.py)"
    rf"(?:`?: `(?P<ticked>{IDENT})"  # path.py: `name`   `path.py`: `name`
    rf"|: (?P<bare>{IDENT})"  # `path.py: name`
    rf"|`? `(?P<spaced>{IDENT}))?"  # path.py `name`
)


def references(text: str) -> list[tuple[str, str | None]]:
    """(path, name or None) for every code reference of a page, in order."""
    return [(m["path"], m["ticked"] or m["bare"] or m["spaced"]) for m in REF.finditer(text)]


@cache
def defined_names(path: Path) -> frozenset[str]:
    """Top-level names of a module, and for what each top-level class defines both `Class.attr`
    and the bare `attr`."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        names.update(_bound(node))
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                for n in _bound(item):
                    names.update((n, f"{node.name}.{n}"))
    return frozenset(names)


def _bound(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def stale(text: str, root: Path = ROOT) -> list[str]:
    """The references of `text` that name a missing file or a name the file does not define."""
    found = []
    ours = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}
    for path, name in references(text):
        file = root / path
        if path.split("/")[0] not in ours:
            continue  # another project's source (vLLM's), named as a fact about it
        if not file.is_file():
            found.append(f"{path}: no such file")
        elif name is not None and name not in defined_names(file):
            found.append(f"{path}: {name} is not defined there")
    return found


def test_every_path_and_name_the_docs_give_exists():
    assert DOCS, "docs/*.md not found"
    found = [f"{doc.relative_to(ROOT)} names {s}" for doc in DOCS for s in stale(doc.read_text())]
    assert found == []


def test_the_docs_reference_formats_are_all_read():
    text = (
        "`launch/run/cluster.py: Run.start_ray` and launch/run/problems.py: `load_run_problems`, "
        "`microcoder/config.py`: `Section`, launch/run/supervisor.py `apply_control`, "
        "`buffer/config.py:7`, (launch/run/pools.py)"
    )
    assert references(text) == [
        ("launch/run/cluster.py", "Run.start_ray"),
        ("launch/run/problems.py", "load_run_problems"),
        ("microcoder/config.py", "Section"),
        ("launch/run/supervisor.py", "apply_control"),
        ("buffer/config.py", None),
        ("launch/run/pools.py", None),
    ]


def test_a_renamed_function_or_file_is_reported():
    text = "`launch/run/cluster.py: Run.start_rays`, `launch/runner.py: Run.start_ray`"
    assert stale(text) == [
        "launch/run/cluster.py: Run.start_rays is not defined there",
        "launch/runner.py: no such file",
    ]


def test_a_method_may_be_named_without_its_class_and_other_projects_paths_are_skipped():
    text = "`launch/run/cluster.py: bring_up`, `vllm/v1/worker/gpu_worker.py`, `launch/run/cluster.py: up`"
    assert stale(text) == ["launch/run/cluster.py: up is not defined there"]

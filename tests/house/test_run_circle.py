"""launch/run/cluster.py's `Run` and the modules it imports do not import each other: every
module cluster.py imports (lazily too, and theirs in turn) imports cluster.py under
`TYPE_CHECKING` only, for its annotations (issue 46). Before, cluster.py imported
training_loop.py (`build_controller`) and supervisor.py (`BufferWatch`) inside functions, and
training_loop.py imported `Run` at load: a circle that held only as long as every arrow from
cluster.py stayed lazy. Read from the source, like test_imports.py."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
CLUSTER = "microcoder.launch.run.cluster"


def module_path(module: str, root: Path) -> Path | None:
    """The file of a `microcoder.*` module in this checkout (None: not ours, or no such file)."""
    parts = module.split(".")
    if parts[0] != "microcoder":
        return None
    rest = parts[1:]
    # pyproject.toml's package-dir: microcoder.launch is launch/, microcoder.protocol microcoder/
    if not (rest and rest[0] != "microcoder" and (root / rest[0]).is_dir()):
        rest = ["microcoder", *rest]
    here = root.joinpath(*rest)
    if here.with_suffix(".py").is_file():
        return here.with_suffix(".py")
    if (here / "__init__.py").is_file():
        return here / "__init__.py"
    return None


def runtime_imports(path: Path) -> list[str]:
    """Every module `path` imports when it runs (inside functions too), and the submodules its
    `from X import name` may name; not those under `if TYPE_CHECKING:`."""
    out, todo = [], [ast.parse(path.read_text(), str(path))]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        todo.extend(ast.iter_child_nodes(node))
    return out


def importers_of_cluster(root: Path) -> list[str]:
    """The modules reached from cluster.py's imports that import cluster.py at run time."""
    start = module_path(CLUSTER, root)
    seen, todo, found = {start}, [start], []
    while todo:
        path = todo.pop()
        for module in runtime_imports(path):
            target = module_path(module, root)
            if target is None:
                continue
            if target == start and path != start:
                found.append(f"{path.relative_to(root).as_posix()} imports {module}")
            elif target not in seen:
                seen.add(target)
                todo.append(target)
    return sorted(set(found))


def test_no_module_cluster_imports_imports_it_back():
    assert importers_of_cluster(ROOT) == []


def test_the_check_sees_a_lazy_circle(tmp_path):
    """The old tree's shape: cluster.py imports a helper inside a function, the helper imports
    Run at load; and a TYPE_CHECKING import is no arrow."""
    run = tmp_path / "launch" / "run"
    run.mkdir(parents=True)
    (tmp_path / "microcoder").mkdir()
    (run / "cluster.py").write_text(
        "class Run:\n    def f(self):\n"
        "        from microcoder.launch.run.training_loop import build_controller\n"
        "        from microcoder.launch.run.supervisor import BufferWatch\n"
    )
    (run / "training_loop.py").write_text("from microcoder.launch.run.cluster import Run\n")
    (run / "supervisor.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from microcoder.launch.run.cluster import Run\n"
    )
    assert importers_of_cluster(tmp_path) == [
        "launch/run/training_loop.py imports microcoder.launch.run.cluster"
    ]

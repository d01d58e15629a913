"""An executor opens the run's problem store by path (data/store.py): it starts without reading
the problem file, and judges what the store holds beside what `add_problems` registers."""

from __future__ import annotations

import time

from microcoder.actors.executor import Executor
from microcoder.data.config import DataSourceConfig
from microcoder.data.problem import Problem
from microcoder.data.store import build_store
from microcoder.sandbox import ExecutorConfig


def row(pid: str) -> str:
    return (
        f'{{"id": "{pid}", "kind": "stdin", "prompt": "echo", '
        '"tests": [{"input": "1\\n", "output": "1\\n"}]}\n'
    )


def test_an_executor_starts_from_the_store_without_the_source_file(tmp_path):
    src = tmp_path / "problems.jsonl"
    src.write_text("".join(row(f"p{i}") for i in range(500)))
    store = build_store([DataSourceConfig(path=str(src))], 0, 0.0, tmp_path / "s", log=print)[0]
    src.rename(tmp_path / "gone.jsonl")  # a start that parsed the file would fail now
    t0 = time.monotonic()
    ex = Executor("exec-s", ExecutorConfig(workers=1), store=str(store))
    try:
        started = time.monotonic() - t0
        assert ex.ready()["problems"] == 500
        assert ex.problems["p7"].id == "p7"
        assert ex.problems.get("nope") is None  # scoring's lookup of an unknown id
        extra = Problem("eval-1", "stdin", "x", [{"input": "", "output": ""}])
        assert ex.add_problems([extra]) == 501
        assert ex._registered("eval-1") is extra
        assert ex._registered("p499").id == "p499"
        assert started < 5  # the sandbox pool's start included; nothing is loaded
    finally:
        ex.shutdown()


def test_an_executor_without_a_store_knows_only_what_is_added():
    ex = Executor("exec-n", ExecutorConfig(workers=1))
    try:
        assert ex.ready()["problems"] == 0
        assert "a" not in ex.problems
    finally:
        ex.shutdown()

"""Test helpers for the benchmark tests (tests/bench): `pipeline_result`, the file
`microcoder bench pipeline` writes (bench/pipeline/__init__.py `run`), around a test's parts.
Importable as `bench_testing` because tests/conftest.py puts tests/support on sys.path."""

from __future__ import annotations

from typing import Any


def pipeline_result(real: dict, **parts: Any) -> dict[str, Any]:
    """A `bench pipeline` result on 2 CPUs with its `real` part, the other `parts` (e.g.
    `simulated`) and the headline taken from `real`, as `run` adds it."""
    from microcoder.bench.pipeline import headline

    return {
        "date": "today",
        "cpus": 2,
        "load_start": 1.0,
        "load_end": 2.0,
        "real": real,
        **parts,
        **headline(real, 2),
    }

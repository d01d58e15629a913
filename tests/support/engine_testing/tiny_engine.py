"""An AsyncLLM over the tiny model on the CPU, as the engine tests start it
(tests/actors/test_async_engine.py, test_kv_floor_engine.py, test_generate_loop.py):
`tiny_async_engine` (a context manager), `engine_fixture` (their module-scoped `engine`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def tiny_async_engine(model_dir, rpc_timeout_s: float = 120.0, **generator) -> Iterator:
    """`build_async_engine` (actors/engines/async_llm.py) with the generator's worker extension,
    seed 0 at version 0, eager, a 1 GiB KV cache and `generator`'s GeneratorConfig fields (the
    prompt and response budgets, `engine_args`); shut down on leaving."""
    from microcoder.actors.config import GeneratorConfig
    from microcoder.actors.engines.async_llm import build_async_engine
    from microcoder.actors.engines.build import WORKER_EXTENSION

    cfg = GeneratorConfig(kv_cache_gib=1, enforce_eager=True, **generator)
    eng = build_async_engine(
        str(model_dir),
        cfg,
        "cpu",
        rpc_timeout_s=rpc_timeout_s,
        worker_extension_cls=WORKER_EXTENSION,  # ties the EngineCore to this process
    )
    try:
        yield eng
    finally:
        eng.shutdown()


def engine_fixture(**generator):
    """A module-scoped pytest fixture `engine`: `tiny_async_engine(tiny_model_dir, **generator)`.
    A test module takes it as `engine = engine_fixture(...)`."""

    @pytest.fixture(scope="module")
    def engine(tiny_model_dir):
        with tiny_async_engine(tiny_model_dir, **generator) as eng:
            yield eng

    return engine

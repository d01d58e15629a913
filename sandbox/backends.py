"""The judge backends, registered once: `executor.backend` names one.

    pool = make_judge(cfg)   # cfg: ExecutorConfig; a JudgePool-like object

Every backend has the JudgePool surface the executor and the evaluation use: `submit(problem,
code, solution_id, tag)`, `as_completed(timeout)`, `channel()` (a submit / as_completed of its
own for one thread), `size` (programs judged at once), `close()`.

- `local`: this host's bubblewrap sandbox pool (sandbox/pool.py: JudgePool);
- `http`: a remote judge service, `microcoder judge serve` (sandbox/remote/client.py: HttpJudgePool;
  the protocol is in that module's docstring).
"""

from __future__ import annotations

from importlib import import_module

BACKENDS: dict[str, str] = {
    "local": "microcoder.sandbox.pool:JudgePool",
    "http": "microcoder.sandbox.remote.client:HttpJudgePool",
}
"""`executor.backend` -> the class ("module:Class") built with the ExecutorConfig."""


def make_judge(cfg):
    """The judge of `cfg.backend`, started (a down server or a host without bubblewrap raises
    here, naming the fix)."""
    if cfg.backend not in BACKENDS:
        raise ValueError(
            f"executor.backend: unknown {cfg.backend!r}; set it to one of {', '.join(BACKENDS)}"
        )
    module, _, name = BACKENDS[cfg.backend].partition(":")
    return getattr(import_module(module), name)(cfg)

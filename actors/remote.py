"""Ray wrappers of the actor bodies, with resources from config (the only place ray.remote is
applied, so the bodies stay plain classes that unit tests can build without Ray)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from microcoder.actors.buffer_host import BufferHost
from microcoder.actors.executor import Executor
from microcoder.actors.learner_rank import (
    CONCURRENCY_GROUPS,
    LEARNER_THREADS,
    LearnerRank,
    group_sizes,
)

if TYPE_CHECKING:
    from microcoder.actors.config import GeneratorConfig
    from microcoder.learner.config import LearnerConfig
    from microcoder.sandbox.config import ExecutorConfig


EXECUTOR_THREADS = 64
"""An executor's Ray threads: its judging loop, `stats`/`memory` calls and the environment
runs (`Executor.run_program`) every generator's trajectories ask for at once; each waits on the
shared judge queue (evaluation/judge_queue.py), so the threads cost a stack each, not a CPU."""


def buffer_host_cls():
    import ray

    return ray.remote(num_cpus=0, max_concurrency=4)(BufferHost)


def generator_cls(g: GeneratorConfig):
    import ray

    from microcoder.actors.generator import Generator

    return ray.remote(num_cpus=g.cpus_per_engine, num_gpus=g.gpus_per_engine, max_concurrency=4)(
        Generator
    )


def executor_cls(executor: ExecutorConfig):
    import ray

    return ray.remote(num_cpus=executor.cpus_per_executor, max_concurrency=EXECUTOR_THREADS)(
        Executor
    )


def learner_rank_cls(learner: LearnerConfig, generators: int, body: type | None = None):
    """A learner rank's Ray class, with rank 0's concurrency groups sized for `generators`
    generators (actors/learner_rank.py: `CONCURRENCY_GROUPS`, `group_sizes`). `body`: the
    actor's class (default LearnerRank; a subclass keeps the groups of the methods it
    inherits)."""
    import ray

    body = body or LearnerRank
    for group, methods in CONCURRENCY_GROUPS.items():
        for method in methods:
            ray.method(concurrency_group=group)(getattr(body, method))
    return ray.remote(
        num_cpus=1,
        num_gpus=learner.gpus_per_rank,
        max_concurrency=LEARNER_THREADS,
        concurrency_groups=group_sizes(generators),
    )(body)

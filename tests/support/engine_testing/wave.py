"""A generator that also samples one wave on request, for the tests that lease prompts
themselves and want their groups back (the product's generator only streams, actors/generate_loop.py).

`wave_generator_cls(generator_config)` is `actors/remote.py: generator_cls` for a subclass of
the product's Generator with one more method, `generate_wave(assignments)`. The subclass is
made inside the function, so Ray ships it by value: its workers need not import this folder
(tests/support is on the driver's sys.path only)."""

from __future__ import annotations

from typing import Any


def wave_generator_cls(g: Any):
    """The Ray actor class of a Generator with `generate_wave`, with generator_cls's resources."""
    import ray

    from microcoder.actors.generator import Generator

    class WaveGenerator(Generator):
        def generate_wave(self, assignments) -> list:
            """Sample these leased assignments now, one group each, all in flight at once. A
            group the engine raises on is reported failed (as in the loop) and left out; a dead
            engine still kills the actor."""
            from microcoder.actors.generate_loop import engine_dead

            futures = [
                (a, self._submit(self._sample_coro(a, self.temperature))) for a in assignments
            ]
            groups = []
            for a, f in futures:
                try:
                    groups.append(f.result())
                except Exception as err:
                    if engine_dead(err):
                        raise
                    self._group_failed(a, err)
            self._count(groups)
            return groups

    return ray.remote(num_cpus=g.cpus_per_engine, num_gpus=g.gpus_per_engine, max_concurrency=4)(
        WaveGenerator
    )

"""The bare side of `microcoder bench generation`: a vLLM engine and one `LLM.generate` call, in a
Ray actor with the generator's resources and concurrency, so both sides run their engine in the
same process and thread environment. Why: Ray sets OMP_NUM_THREADS to the actor's CPUs, and a
threaded actor (max_concurrency > 1) runs methods off the thread vLLM bound its OpenMP threads
to; the same engine in the driver process ran 3.5x slower, and in a single-threaded actor ~10%
slower, than in the generator on the loaded 2-core machine: thread settings, not actor work."""

from __future__ import annotations

import time

from microcoder.actors.engines.build import build_engine


class BareEngine:
    """Ray actor body: `build_engine` with the generator's settings; times `LLM.generate` only."""

    def __init__(self, model_path: str, cfg, device: str):
        self.llm = build_engine(
            model_path,
            cfg.generator,
            device,
            seed=cfg.seed,
            worker_extension_cls="microcoder.actors.engines.worker_ext.WeightLoaderExtension",
        )
        self.cfg = cfg

    def generate(self, prompt_ids: list[list[int]]) -> dict:
        """One `LLM.generate` over all prompts with the generator's SamplingParams."""
        from microcoder.actors.sampling import sampling_params

        g = self.cfg.generator
        a = self.cfg.algorithm
        params = sampling_params(
            group_size=a.group_size,
            temperature=a.temperature.initial,
            max_tokens=g.max_response_tokens,
            ignore_eos=g.ignore_eos,
        )
        prompts = [{"prompt_token_ids": p} for p in prompt_ids]
        t0 = time.perf_counter()
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - t0
        tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
        return {"tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall}

    def shutdown(self) -> None:
        try:
            self.llm.llm_engine.engine_core.shutdown()
        except Exception:
            pass


def bare_engine_cls(cfg):
    """BareEngine as a Ray actor with the same resources as a generator (actors/remote.py)."""
    import ray

    g = cfg.generator
    return ray.remote(num_cpus=g.cpus_per_engine, num_gpus=g.gpus_per_engine, max_concurrency=4)(
        BareEngine
    )

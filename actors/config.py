"""Config of the generator pool (section `[generator]`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from microcoder.config import Section


class GeneratorConfig(Section):
    num_engines: int = Field(1, ge=0)
    """Generator actors, one vLLM engine each. Scale a live run with `microcoder scale generators N`."""
    gpus_per_engine: float = Field(0.0, ge=0)
    """GPUs per engine (tensor parallel size on CUDA); 0 on CPU machines."""
    cpus_per_engine: float = Field(1.0, gt=0)
    """Ray CPUs reserved per engine."""
    max_response_tokens: int = Field(512, ge=1)
    """Generation stops here; such a response is flagged truncated."""
    max_prompt_tokens: int = Field(1024, ge=1)
    """Longest prompt in tokens (chat template applied, the run's tokenizer). Prompts over it are
    skipped when the data is loaded (launch/problems.py `prepare_run_problems`, training and
    held-out alike): never sent to an engine, not counted in the buffer, listed in
    RUN_DIR/skipped_prompts.jsonl with one warning. The engine's context is this plus
    max_response_tokens."""
    max_inflight_prompts: int = Field(16, ge=1)
    """Prompts (groups) an engine works on at once."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Engine precision; auto = float32 on CPU (matches the learner), bfloat16 on GPU."""
    kv_cache_gib: float = Field(2.0, gt=0)
    """CPU KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE); on GPU see gpu_memory_utilization."""
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    """Fraction of GPU memory the engine may take (CUDA only)."""
    ignore_eos: bool = False
    """Sample past the end-of-sequence token up to max_response_tokens (fixed-size work for
    `microcoder bench generation`; keep false for training)."""

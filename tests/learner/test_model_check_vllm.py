"""`model check`'s vLLM stage (actors/engines/vllm_check.py): an engine built on random (dummy)
weights loads the learner's published state through the worker extension's reload path, and its
greedy tokens then equal transformers' on the folder, for qwen3 and llama (qwen3_moe:
tests/learner/test_model_check.py). A head size vLLM's CPU attention refuses fails the stage with
the reason and starts no engine; without vLLM the stage says it is skipped."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from family_models import build_family


@pytest.mark.slow  # one `model check` subprocess per family: learner, transformers, one engine
@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_the_engine_greedy_equals_transformers_after_the_reload(family, tmp_path):
    folder = build_family(family, tmp_path / family)
    res = subprocess.run(
        [sys.executable, "-m", "microcoder", "model", "check", str(folder), "--json"],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads(res.stdout)
    stage = report["vllm"]
    assert stage["status"] == "ok" and stage["greedy_equal"], stage
    assert stage["after"] == stage["transformers_greedy"]
    assert [len(t) for t in stage["after"]] == [16, 16]
    # every tensor of the checkpoint went through the reload (qwen3 25, llama 21: no q/k norm)
    assert stage["tensors_loaded"] == report["names"]["count"] == {"qwen3": 25, "llama": 21}[family]
    assert stage["before"] != stage["after"]  # the dummy weights alone give other tokens


def _config(**over) -> dict:
    from family_models import COMMON

    return {"model_type": "qwen3", **COMMON, **over}


def test_an_unsupported_cpu_head_size_fails_the_stage_without_an_engine(tmp_path):
    from microcoder.actors.engines.vllm_check import vllm_stage

    stage = vllm_stage(tmp_path, _config(head_dim=16), {}, "cpu")
    assert stage["status"] == "failed" and stage["engine_started"] is False
    assert "head_dim 16" in stage["reason"] and 'cluster.device = "cuda"' in stage["reason"]


def test_the_stage_is_skipped_with_the_reason_where_vllm_is_not_importable(tmp_path, monkeypatch):
    from microcoder.actors.engines.vllm_check import vllm_stage
    from microcoder.learner.models.model_check import format_vllm

    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` raises, as without it
    stage = vllm_stage(tmp_path, _config(), {}, "cpu")
    assert stage == {"status": "skipped", "reason": "vLLM not importable (no module named 'vllm')"}
    assert format_vllm(stage) == (
        "vLLM greedy vs transformers: skipped: vLLM not importable (no module named 'vllm')"
    )


def test_an_engine_past_its_deadline_fails_the_stage_instead_of_hanging(tmp_path):
    """The child is killed at the deadline (1 s: vLLM's import alone takes longer)."""
    import time

    from safetensors.torch import load_file

    from microcoder.actors.engines.vllm_check import vllm_stage

    folder = build_family("qwen3", tmp_path / "qwen3")
    state = load_file(folder / "model.safetensors")
    t0 = time.monotonic()
    stage = vllm_stage(folder, _config(), state, "cpu", timeout_s=1.0)
    assert time.monotonic() - t0 < 30
    assert stage["status"] == "failed", stage
    assert "did not finish within 1 s" in stage["reason"] and "--vllm-timeout" in stage["reason"]

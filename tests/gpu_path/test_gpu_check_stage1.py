"""gpu-check's stage 1 (scripts/gpu_check_stage1.py) runs on a bare box: on the CPU at a toy size
it passes every check, prints one JSON line per measurement, and never imports vLLM or Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

RUN = """
import json, sys
sys.path.insert(0, {scripts!r})
import gpu_check_stage1
rc = gpu_check_stage1.main(["--device", "cpu", "--small", "--tokens", "128"])
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {{"vllm", "ray"}})
print(json.dumps({{"wrapper": True, "rc": rc, "heavy": heavy}}))
"""


@pytest.fixture(scope="module")
def stage1():
    code = RUN.format(scripts=str(REPO / "scripts"))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return lines[:-1], lines[-1]


@pytest.mark.slow
def test_stage1_passes_on_cpu_without_importing_vllm_or_ray(stage1):
    records, wrapper = stage1
    assert wrapper == {"wrapper": True, "rc": 0, "heavy": []}
    summary = records[-1]
    assert summary["check"] == "summary" and summary["ok"] and summary["failed"] == []


@pytest.mark.slow
def test_stage1_reports_each_check_as_a_json_line(stage1):
    records, _ = stage1
    assert all(r["stage"] == 1 for r in records)
    checks = [r["check"] for r in records]
    assert checks.count("memory") == 2  # one token count, checkpointing off and on
    assert {"ckpt_grad_norm", "logprobs", "publish", "imports", "summary"} <= set(checks)
    memory = [r for r in records if r["check"] == "memory"]
    assert all(r["planned_backward_gib"] > 0 and r["grad_norm"] > 0 for r in memory)
    (publish,) = [r for r in records if r["check"] == "publish"]
    assert publish["dtypes"] == [publish["want"]]


@pytest.mark.slow
def test_stage1_runs_the_offload_modes_from_one_start(stage1):
    records, _ = stage1
    offload = {r["mode"]: r for r in records if r["check"] == "offload"}
    assert list(offload) == ["none", "optimizer", "params"]
    for r in offload.values():
        assert r["ok"] and r["host_ok"] and len(r["step_s"]) == r["steps"] == 3
        assert r["max_weight_moved"] > 0 and r["planned_peak_gib"] > 0
        assert r["peak_gib"] is None  # no CUDA counter on the CPU
    assert offload["none"]["places"] == dict.fromkeys(("masters", "grads", "moments"), "device")
    # the streamed AdamW moved the moments and left them in its own host buffers, same weights
    opt = offload["optimizer"]
    assert opt["moments_host_resident"] and opt["streamed_gib"] is not None
    assert opt["places"]["moments"] == "host" and opt["max_weight_diff_vs_none"] == 0.0
    par = offload["params"]
    assert par["params_offloaded"] and set(par["places"].values()) == {"host"}
    assert par["planned_host_gib"] >= opt["planned_host_gib"]
    assert par["grad_norms"][0] == opt["grad_norms"][0] == offload["none"]["grad_norms"][0]


@pytest.mark.slow
def test_stage1_reports_attention_window_and_the_multi_gpu_gap(stage1):
    records, _ = stage1
    by = {r["check"]: r for r in records}
    assert by["attention"]["flash_attn"] is False and by["attention"]["note"]
    window = by["window"]
    assert window["ok"] and window["windowed_layers"] == 2  # the toy's layers, every one
    assert window["sliding_window"] < window["tokens"] // 8  # shorter than each sequence
    for name in ("sequence_parallel", "hsdp"):
        assert by[name]["runnable"] is False and by[name]["needs_gpus"] == 2
    assert by["summary"]["not_runnable"] == ["sequence_parallel", "hsdp"]

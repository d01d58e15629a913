"""The placement plan: recipes validate against described clusters; bad splits say how to fix."""

from __future__ import annotations

from pathlib import Path

from microcoder.launch.config import load_config
from microcoder.launch.placement import make_plan

REPO = Path(__file__).resolve().parents[2]
GPU_RECIPE = REPO / "configs" / "qwen2.5-coder-1.5b-8gpu.toml"


def test_gpu_recipe_fits_an_8_gpu_node_with_4_generating_and_4_training():
    plan = make_plan(load_config(GPU_RECIPE), "cuda", 96, 8)
    assert plan.errors == []
    pools = {p.name: p for p in plan.pools}
    assert pools["generator"].gpus == 4 and pools["learner"].gpus == 4


def test_gpu_recipe_on_4_gpus_names_the_fix():
    plan = make_plan(load_config(GPU_RECIPE), "cuda", 96, 4)
    assert any("need 8 GPUs" in e and "generator.num_engines" in e for e in plan.errors)


def test_fractional_gpus_are_refused_so_pools_never_share_a_device():
    cfg = load_config(GPU_RECIPE, ["generator.gpus_per_engine=0.5"])
    assert any("generator.gpus_per_engine" in e for e in make_plan(cfg, "cuda", 96, 8).errors)


def test_tiny_recipe_oversubscribes_logical_cpus_on_a_laptop_with_a_note():
    plan = make_plan(load_config(REPO / "configs" / "tiny-cpu.toml"), "cpu", 2, 0)
    assert plan.errors == [] and plan.notes


def test_gpus_on_a_cpu_device_are_an_error():
    cfg = load_config(REPO / "configs" / "tiny-cpu.toml", ["learner.gpus_per_rank=1"])
    assert any("learner.gpus_per_rank" in e for e in make_plan(cfg, "cpu", 2, 0).errors)


def test_dry_run_cli_exits_nonzero_on_plan_errors():
    import subprocess
    import sys

    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "microcoder",
            "launch",
            str(GPU_RECIPE),
            "--dry-run",
            "--cluster-cpus",
            "96",
            "--cluster-gpus",
            "8",
        ],
        capture_output=True,
        text=True,
    )
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "microcoder",
            "launch",
            str(GPU_RECIPE),
            "--dry-run",
            "--cluster-cpus",
            "96",
            "--cluster-gpus",
            "4",
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and "placement plan" in ok.stdout
    assert bad.returncode == 1 and "ERROR" in bad.stdout

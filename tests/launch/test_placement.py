"""The placement plan: recipes validate against described clusters; bad splits say how to fix."""

from __future__ import annotations

from pathlib import Path

from microcoder.launch.config import load_config
from microcoder.launch.run.placement import make_plan

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


TINY = REPO / "configs" / "tiny-cpu.toml"
ONE_GPU_SHARED = [
    "cluster.device=cuda",
    "generator.gpus_per_engine=0.5",
    "learner.gpus_per_rank=0.5",
    "generator.gpu_memory_utilization=0.3",
]


def test_engines_whose_vllm_memory_overfills_one_gpu_are_refused_with_the_fix():
    # 0.5 GPU per engine: Ray may pack 2 of the recipe's engines on one GPU, and each claims
    # generator.gpu_memory_utilization = 0.85 of the whole GPU.
    cfg = load_config(GPU_RECIPE, ["generator.gpus_per_engine=0.5"])
    errors = make_plan(cfg, "cuda", 96, 8).errors
    assert any(
        "generator.gpus_per_engine" in e and "generator.gpu_memory_utilization to at most 0.5" in e
        for e in errors
    )


def test_engines_sharing_gpus_within_their_memory_are_planned_with_a_note():
    cfg = load_config(
        GPU_RECIPE, ["generator.gpus_per_engine=0.5", "generator.gpu_memory_utilization=0.45"]
    )
    plan = make_plan(cfg, "cuda", 96, 8)
    assert plan.errors == [] and any("engines share GPUs" in n for n in plan.notes)


def test_one_gpu_shared_by_the_learner_and_a_generator_is_planned_with_a_memory_note():
    plan = make_plan(load_config(TINY, ONE_GPU_SHARED), "cuda", 16, 1)
    assert plan.errors == []
    (note,) = [n for n in plan.notes if "share a device" in n]
    assert "generator.gpu_memory_utilization = 0.3" in note and "70%" in note


def test_a_generator_claiming_the_whole_shared_gpu_is_refused_as_leaving_the_learner_none():
    cfg = load_config(TINY, [*ONE_GPU_SHARED, "generator.gpu_memory_utilization=1.0"])
    assert any("leaves the learner no memory" in e for e in make_plan(cfg, "cuda", 16, 1).errors)


def test_learner_ranks_sharing_gpus_are_refused_since_nccl_needs_a_gpu_per_rank():
    cfg = load_config(TINY, [*ONE_GPU_SHARED, "learner.world_size=2"])
    errors = make_plan(cfg, "cuda", 16, 2).errors
    assert any("learner.world_size = 2" in e and "learner.gpus_per_rank = 1" in e for e in errors)


def test_a_share_above_one_gpu_is_refused_naming_the_whole_numbers_around_it():
    cfg = load_config(GPU_RECIPE, ["generator.gpus_per_engine=1.5"])
    errors = make_plan(cfg, "cuda", 96, 16).errors
    assert any("generator.gpus_per_engine = 1.5" in e and "to 1 or 2" in e for e in errors)


def test_no_gpu_for_a_pool_on_cuda_is_refused():
    cfg = load_config(GPU_RECIPE, ["learner.gpus_per_rank=0"])
    assert any("learner.gpus_per_rank = 0" in e for e in make_plan(cfg, "cuda", 96, 8).errors)


def test_shares_that_do_not_pack_onto_the_gpus_are_refused_though_their_sum_fits():
    # 3 engines at 0.6 GPU need 1.8 GPUs, but no two fit on one GPU: with the learner's whole
    # GPU that is 4 GPUs, not the 2.8 the sum says.
    cfg = load_config(
        GPU_RECIPE,
        ["generator.num_engines=3", "generator.gpus_per_engine=0.6", "learner.world_size=1"],
    )
    errors = make_plan(cfg, "cuda", 96, 3).errors
    assert any("do not pack onto 3 GPUs" in e for e in errors)
    assert make_plan(cfg, "cuda", 96, 4).errors == []


def test_tiny_recipe_oversubscribes_logical_cpus_on_a_laptop_with_a_note():
    plan = make_plan(load_config(TINY), "cpu", 2, 0)
    assert plan.errors == [] and plan.notes


def test_gpus_on_a_cpu_device_are_an_error():
    cfg = load_config(TINY, ["learner.gpus_per_rank=1"])
    assert any("learner.gpus_per_rank" in e for e in make_plan(cfg, "cpu", 2, 0).errors)


def test_dry_run_cli_exits_nonzero_on_plan_errors():
    import subprocess
    import sys

    # the dry-run checks the problem file and reads the model's config.json, as the launch
    # does; this test is about the plan, so it needs neither (tests/gpu_path/test_recipes.py
    # dry-runs the recipes with their files)
    NO_FILES = ["--set", "data.source=synthetic", "--set", "model.build_tiny=true"]

    def dry_run(gpus: int) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "microcoder", "launch", str(GPU_RECIPE), *NO_FILES]
        cmd += ["--dry-run", "--cluster-cpus", "96", "--cluster-gpus", str(gpus)]
        return subprocess.run(cmd, capture_output=True, text=True)

    ok, bad = dry_run(8), dry_run(4)
    assert ok.returncode == 0 and "placement plan" in ok.stdout
    assert bad.returncode == 1 and "ERROR" in bad.stdout


def joined_run(monkeypatch, tmp_path, resources: dict, *overrides: str):
    """A Run joining a cluster that advertises `resources` (ray.init and the cluster faked)."""
    import ray

    from microcoder.launch.run.cluster import Run

    calls = {}
    monkeypatch.setattr(ray, "init", lambda **kw: calls.update(init=kw))
    monkeypatch.setattr(ray, "cluster_resources", lambda: dict(resources))
    monkeypatch.setattr(ray, "shutdown", lambda: calls.update(shutdown=True))
    cfg = load_config(TINY, ['cluster.address="10.0.0.7:6379"', *overrides])  # as --address sets
    return Run(cfg, tmp_path, cfg.cluster.address), calls


def test_a_joined_cluster_is_planned_with_its_own_resources_not_the_drivers(monkeypatch, tmp_path):
    from microcoder.launch.run.placement import cluster_totals

    assert cluster_totals({"CPU": 96.0, "GPU": 8.0, "memory": 1e12}) == (96.0, 8.0)
    assert cluster_totals({"CPU": 4.0}) == (4.0, 0.0)
    run, calls = joined_run(monkeypatch, tmp_path, {"CPU": 640.0, "GPU": 0.0})
    run.start_ray(plan_cpus=3)
    assert calls["init"]["address"] == "10.0.0.7:6379" and "shutdown" not in calls
    log = (tmp_path / "launcher.log").read_text()
    assert "cluster 640 CPUs, 0 GPUs" in log  # this machine has 2 cores


def test_a_plan_that_does_not_fit_the_joined_cluster_stops_the_run(monkeypatch, tmp_path):
    import pytest

    run, calls = joined_run(monkeypatch, tmp_path, {"CPU": 1.0}, "cluster.device=cpu")
    with pytest.raises(RuntimeError, match="does not fit the cluster at 10.0.0.7:6379.*CPUs"):
        run.start_ray(plan_cpus=3)
    assert calls["shutdown"]  # the driver leaves the cluster it joined


def test_a_joined_run_resolves_device_auto_from_the_clusters_gpus_not_the_drivers(
    monkeypatch, tmp_path
):
    gpus = ["generator.gpus_per_engine=1", "learner.gpus_per_rank=1", "cluster.device=auto"]
    run, calls = joined_run(monkeypatch, tmp_path, {"CPU": 64.0, "GPU": 8.0}, *gpus)
    run.start_ray(plan_cpus=3)  # this machine has no GPU: the driver alone would say cpu
    assert run.cfg.cluster.device == "cuda" and "shutdown" not in calls
    run, _ = joined_run(monkeypatch, tmp_path, {"CPU": 64.0}, "cluster.device=auto")
    run.start_ray(plan_cpus=3)
    assert run.cfg.cluster.device == "cpu"


def test_a_joined_cluster_without_enough_of_a_pinned_resource_stops_the_run(monkeypatch, tmp_path):
    import pytest

    pinned = ["generator.resources={second = 1}", "executor.resources={second = 1}"]
    run, calls = joined_run(monkeypatch, tmp_path, {"CPU": 64.0, "second": 1.0}, *pinned)
    with pytest.raises(RuntimeError, match="2 of custom resource 'second'.*advertises 1"):
        run.start_ray(plan_cpus=3)
    assert calls["shutdown"]
    run, calls = joined_run(monkeypatch, tmp_path, {"CPU": 64.0, "second": 4.0}, *pinned)
    run.start_ray(plan_cpus=3)
    assert "shutdown" not in calls


def test_a_joined_launch_prints_no_driver_plan_and_leaves_device_auto_to_the_cluster(
    monkeypatch, tmp_path, capsys
):
    """run_command on `--address HOST:PORT`: the driver's CPU/GPU count is not the cluster's,
    so no plan is made or printed before Ray, and `cluster.device = "auto"` reaches
    Run.start_ray (plan_on_cluster resolves it from the cluster's GPUs) unresolved."""
    from argparse import Namespace
    from types import SimpleNamespace

    from microcoder import device
    from microcoder.launch.run import cluster, command
    from microcoder.launch.run.command import launch

    def no_driver_device(requested):
        raise AssertionError("cluster.device resolved on the driver")

    seen = {}

    def start_ray(run, plan_cpus, check_plan=True):
        seen.update(device=run.cfg.cluster.device, plan_cpus=plan_cpus)
        raise KeyboardInterrupt  # stop here: bring-up is not this test's subject

    monkeypatch.setattr(device, "resolve_device", no_driver_device)
    monkeypatch.setattr(command, "resolve_device", no_driver_device)  # bound at its head
    monkeypatch.setattr(cluster.Run, "start_ray", start_ray)
    monkeypatch.setattr(command, "ensure_model", lambda m, c: tmp_path / "model")
    stub = SimpleNamespace(stop=lambda: None, set_state=lambda s: None)
    monkeypatch.setattr(command, "start_monitoring", lambda run: stub)
    sets = ['cluster.address="10.0.0.7:6379"', "cluster.device=auto"]
    shared = [f'cluster.shared_dir="{tmp_path}"', f'model.path="{tmp_path}/model"']
    cfg = load_config(TINY, [*sets, *shared])
    assert launch(cfg, Namespace(resume=None, run_dir=str(tmp_path / "run"))) == 130
    assert seen == {"device": "auto", "plan_cpus": 0.0}
    assert "placement plan" not in capsys.readouterr().out

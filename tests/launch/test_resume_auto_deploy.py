"""deploy/: the Slurm requeue script and the KubeRay RayJob run `microcoder launch ... --resume
auto` (docs/architecture.md §10). Each file is parsed (the sbatch by its #SBATCH lines, the
manifest with PyYAML) and its launch line is run as written, with --dry-run, with only its
variables pointed at the tiny recipe and a temporary run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from microcoder.launch.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SBATCH = ROOT / "deploy" / "slurm-requeue.sbatch"
RAYJOB = ROOT / "deploy" / "kuberay-rayjob.yaml"
BIN = Path(sys.executable).parent  # the venv's `microcoder` on PATH


def sbatch_options(text: str) -> dict[str, str]:
    """{option: value} of the #SBATCH lines ("" for a flag)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH "):
            opt, _, value = line.split(None, 1)[1].partition("=")
            out[opt] = value
    return out


def dry_run(line: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run a launch line through bash, as the scheduler would, with --dry-run appended."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(
        ["bash", "-c", line + " --dry-run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_slurm_script_requeues_and_its_launch_line_dry_runs(tmp_path):
    text = SBATCH.read_text()
    opts = sbatch_options(text)
    assert "--requeue" in opts and opts["--signal"].startswith("B:TERM@")
    assert opts["--gpus-per-node"] == "8" and opts["--nodes"] == "1"
    default = text.split('CONFIG="${CONFIG:-', 1)[1].split("}", 1)[0]
    assert load_config(ROOT / default, []).learner.world_size >= 1  # the named recipe loads
    [line] = [x for x in text.splitlines() if "microcoder launch" in x and not x.startswith("#")]
    assert line.startswith("exec ") and line.endswith("--resume auto")
    env = {"CONFIG": "configs/tiny-cpu.toml", "RUN_DIR": str(tmp_path / "run")}
    done = dry_run(line.removeprefix("exec "), env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"--resume auto: {tmp_path / 'run'} has no complete checkpoint; starting fresh" in (
        done.stdout
    )


def test_the_rayjob_retries_on_the_shared_volume_and_its_entrypoint_dry_runs(tmp_path):
    job = yaml.safe_load(RAYJOB.read_text())
    spec = job["spec"]
    assert job["kind"] == "RayJob" and spec["backoffLimit"] >= 1
    env_vars = yaml.safe_load(spec["runtimeEnvYAML"])["env_vars"]
    recipe = load_config(ROOT / env_vars["MICROCODER_CONFIG"], [])
    shared = recipe.cluster.shared_dir
    assert recipe.cluster.address == "auto"
    assert Path(env_vars["RUN_DIR"]).is_relative_to(shared)  # every attempt sees the checkpoints
    pods = [spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]] + [
        g["template"]["spec"] for g in spec["rayClusterSpec"]["workerGroupSpecs"]
    ]
    for pod in pods:
        assert {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]} == {shared}
    gpus = sum(
        g["replicas"]
        * int(
            g["template"]["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0)
        )
        for g in spec["rayClusterSpec"]["workerGroupSpecs"]
    )
    assert gpus == 64  # the 64-GPU recipe's cluster
    env = {"MICROCODER_CONFIG": "configs/tiny-cpu.toml", "RUN_DIR": str(tmp_path / "run")}
    done = dry_run(spec["entrypoint"], env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "starting fresh" in done.stdout


def test_resume_auto_needs_a_run_dir():
    done = dry_run("microcoder launch configs/tiny-cpu.toml --resume auto", {})
    assert done.returncode == 2 and "--resume auto needs --run-dir DIR" in done.stdout

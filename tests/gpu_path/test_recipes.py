"""Every shipped recipe launches as far as a CPU can tell: it resolves, passes its own dry-run
at the cluster size it was written for, and has what its `cluster.address` needs; the dry-run
makes the launch's own checks (issue 31, finding 2).

A recipe names its cluster in one header line, `# dry-run: microcoder launch configs/NAME.toml
--dry-run --cluster-gpus N --cluster-cpus C` (docs/recipes.md): the command a user runs to check
it, and the one these tests run. The dry-runs run in a scratch working directory that holds
what a recipe's relative paths name: a problem file at data.source (the recipe's own where the
repository ships it) and, at model.path, the
model's config.json (tests/fixtures/models: the public shapes, no weights), all the memory
plan reads. A joined recipe's
`cluster.shared_dir` is pointed at that directory, as a user points it at their shared mount.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from microcoder.launch.cli.main import main
from microcoder.launch.config import load_config
from microcoder.launch.run.placement import make_plan

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted((REPO / "configs").glob("*.toml"))
GPU_RECIPES = [r for r in RECIPES if load_config(r).cluster.device == "cuda"]
PROBLEMS = REPO / "tests" / "fixtures" / "data" / "own.jsonl"
MODELS = REPO / "tests" / "fixtures" / "models"
ids = {"ids": lambda p: p.name}


def dry_run_argv(recipe: Path) -> list[str]:
    """The recipe's `# dry-run:` header command, as arguments of `microcoder`."""
    lines = [ln for ln in recipe.read_text().splitlines() if ln.startswith("# dry-run:")]
    assert len(lines) == 1, f"{recipe.name}: needs exactly one '# dry-run: microcoder ...' line"
    argv = shlex.split(lines[0].removeprefix("# dry-run:"))
    assert argv[:3] == ["microcoder", "launch", f"configs/{recipe.name}"], lines[0]
    return argv[1:]


def cluster_size(recipe: Path) -> tuple[float, float]:
    """(GPUs, CPUs) of the cluster the recipe is written for, from its dry-run line."""
    argv = dry_run_argv(recipe)
    return float(argv[argv.index("--cluster-gpus") + 1]), float(
        argv[argv.index("--cluster-cpus") + 1]
    )


def run_dry_run(recipe: Path, workdir: Path, *extra: str) -> int:
    """The recipe's own dry-run command from `workdir` (the recipe by absolute path)."""
    argv = dry_run_argv(recipe)
    argv[1] = str(recipe)
    return main([*argv, *extra])


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory holding every file the recipes' relative paths name."""
    for recipe in RECIPES:
        cfg = load_config(recipe)
        source, model = Path(cfg.data.source), Path(cfg.model.path)
        if source.suffix == ".jsonl":
            (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
            shipped = REPO / source  # a recipe that ships its own problems (answer-tiny)
            shutil.copy(shipped if shipped.is_file() else PROBLEMS, tmp_path / source)
        if not cfg.model.build_tiny:
            (tmp_path / model).mkdir(parents=True, exist_ok=True)
            shutil.copy(MODELS / model.name / "config.json", tmp_path / model / "config.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("recipe", RECIPES, **ids)
def test_every_recipe_names_the_cluster_it_is_written_for(recipe):
    gpus, cpus = cluster_size(recipe)
    device = load_config(recipe).cluster.device
    assert cpus >= 1 and (gpus >= 1 if device == "cuda" else gpus == 0)


@pytest.mark.parametrize("recipe", RECIPES, **ids)
def test_every_recipe_passes_its_own_dry_run_at_its_cluster_size(recipe, workdir, capsys):
    joined = load_config(recipe).cluster.address != "local"
    extra = ["--set", f"cluster.shared_dir={workdir}"] if joined else []
    rc = run_dry_run(recipe, workdir, *extra)
    out = capsys.readouterr().out
    assert rc == 0, out[-3000:]
    assert "ERROR" not in out and "\nlaunch: " not in out


@pytest.mark.parametrize("recipe", RECIPES, **ids)
def test_every_recipe_has_what_its_address_needs(recipe):
    cluster = load_config(recipe).cluster
    if cluster.address == "local":
        return  # one machine: every path is shared, nothing else is needed
    assert cluster.shared_dir.startswith("/"), f"{recipe.name}: set cluster.shared_dir"


def test_a_dry_run_refuses_a_joined_recipe_without_shared_dir(workdir, capsys):
    recipe = REPO / "configs" / "qwen2.5-coder-14b-64gpu.toml"
    rc = run_dry_run(recipe, workdir, "--set", "cluster.shared_dir=")
    out = capsys.readouterr().out
    assert rc == 2
    assert "needs cluster.shared_dir" in out and 'set cluster.shared_dir = "' in out


def test_a_dry_run_refuses_address_auto_without_shared_dir_on_any_recipe(workdir, capsys):
    recipe = REPO / "configs" / "qwen2.5-coder-1.5b-8gpu.toml"
    rc = run_dry_run(recipe, workdir, "--address", "auto")
    assert rc == 2 and "needs cluster.shared_dir" in capsys.readouterr().out


def test_a_dry_run_refuses_a_missing_problem_file_as_the_launch_does(workdir, capsys):
    recipe = REPO / "configs" / "qwen2.5-coder-1.5b-8gpu.toml"
    rc = run_dry_run(recipe, workdir, "--set", 'data.source="data/nowhere.jsonl"')
    out = capsys.readouterr().out
    assert rc == 2 and "data/nowhere.jsonl" in out and "set data.source" in out


@pytest.mark.parametrize("recipe", RECIPES, **ids)
def test_every_recipe_evaluates_held_out_problems_at_its_response_length(recipe):
    cfg = load_config(recipe)
    assert cfg.eval.every > 0
    assert cfg.eval.max_tokens == cfg.generator.max_response_tokens


@pytest.mark.parametrize("recipe", GPU_RECIPES, **ids)
def test_every_gpu_recipe_checkpoints_activations(recipe):
    assert load_config(recipe).learner.activation_checkpointing is True


def test_the_ladder_has_one_gpu_one_node_multi_node_and_the_papers_recipe():
    sizes = {r.name: cluster_size(r)[0] for r in GPU_RECIPES}
    assert sizes == {
        "qwen2.5-coder-1.5b-1gpu.toml": 1,
        "qwen2.5-coder-1.5b-8gpu.toml": 8,
        "qwen2.5-coder-7b-8gpu.toml": 8,
        "qwen2.5-coder-14b-64gpu.toml": 64,
        "qwen3-4b-paper.toml": 8,
        "qwen2.5-coder-14b-32k-8gpu.toml": 8,
        "qwen3-30b-a3b-8gpu.toml": 8,
        "qwen3-8b-think-32k-8gpu.toml": 8,
        "lora-7b-1gpu.toml": 1,
    }


@pytest.mark.parametrize("gpu_gb", ["24", "80"])
def test_the_one_gpu_lora_recipe_fits_a_24_and_an_80_gib_gpu(gpu_gb, workdir, capsys):
    recipe = REPO / "configs" / "lora-7b-1gpu.toml"
    assert load_config(recipe).learner.lora.rank == 16
    rc = run_dry_run(recipe, workdir, "--gpu-memory-gb", gpu_gb)
    out = capsys.readouterr().out
    assert rc == 0, out[-3000:]
    assert f"GPU {gpu_gb} GiB" in out and "M adapter parameters train" in out


@pytest.mark.parametrize(
    ("name", "without"),
    [
        # 14B at 32K on 4 ranks: neither sequence parallelism nor offload may go
        ("qwen2.5-coder-14b-32k-8gpu.toml", "learner.offload=none learner.sequence_parallel=1"),
        # 30B-A3B on 4 ranks: the moments must live on the host
        ("qwen3-30b-a3b-8gpu.toml", "learner.offload=none"),
    ],
)
def test_the_long_and_moe_recipes_need_what_they_set(name, without, workdir, capsys):
    sets = [a for s in without.split() for a in ("--set", s)]
    rc = run_dry_run(REPO / "configs" / name, workdir, *sets)
    out = capsys.readouterr().out
    assert rc == 2 and "a learner rank needs" in out


def test_the_long_recipes_plan_their_32k_responses_as_one_micro_batch(workdir, capsys):
    for name in ("qwen2.5-coder-14b-32k-8gpu.toml", "qwen3-8b-think-32k-8gpu.toml"):
        cfg = load_config(REPO / "configs" / name)
        assert cfg.generator.max_response_tokens == 32768
        assert run_dry_run(REPO / "configs" / name, workdir) == 0
        assert "longest sequence 34816" in capsys.readouterr().out


def test_the_one_gpu_recipe_packs_the_learner_and_a_generator_onto_one_gpu():
    cfg = load_config(REPO / "configs" / "qwen2.5-coder-1.5b-1gpu.toml")
    plan = make_plan(cfg, "cuda", 16, 1)
    pools = {p.name: p for p in plan.pools}
    assert plan.errors == []
    assert 0 < pools["learner"].gpus_each < 1 and 0 < pools["generator"].gpus_each < 1
    assert pools["learner"].gpus + pools["generator"].gpus == 1
    assert any(
        "the learner rank and up to 1 generator engine(s) on one GPU" in n for n in plan.notes
    )


def test_the_multi_node_recipe_splits_64_gpus_between_generation_and_training():
    cfg = load_config(REPO / "configs" / "qwen2.5-coder-14b-64gpu.toml")
    pools = {p.name: p for p in make_plan(cfg, "cuda", 768, 64).pools}
    assert pools["generator"].gpus == 32 and pools["learner"].gpus == 32


def test_the_paper_recipe_is_qwen3_4b_at_a_fixed_t_of_1_2_with_8k_responses_and_64_prompts():
    cfg = load_config(REPO / "configs" / "qwen3-4b-paper.toml")
    t = cfg.algorithm.temperature
    assert Path(cfg.model.path).name == "Qwen3-4B-Instruct-2507"
    assert (t.initial, t.calibrate, t.monitor_window, t.schedule) == (1.2, False, 0, [])
    assert cfg.generator.max_response_tokens == 8192 and cfg.learner.batch_size == 64


def test_the_cpu_recipes_keep_their_held_out_budget():
    assert load_config(REPO / "configs" / "tiny-cpu.toml").eval.max_tokens == 64
    assert load_config(REPO / "configs" / "compare-long.toml").eval.max_tokens == 96

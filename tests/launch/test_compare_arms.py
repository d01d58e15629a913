"""Arms of `microcoder compare`: names to overrides, the errors, and the grid's checks before
anything runs (launch/compare/arms.py, launch/compare/plan.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from microcoder.launch.cli.cmd_compare import parse_parallel, parse_seeds
from microcoder.launch.compare.arms import ArmError, parse_arm, parse_arms, resolve_overrides
from microcoder.launch.compare.plan import plan_grid
from microcoder.launch.compare.runner import CompareError
from microcoder.launch.config import load_config

RECIPE = Path("configs/tiny-cpu.toml")


def test_named_arm_mask_all_sets_truncation_mask_all():
    assert parse_arm("mask-all").overrides == ("algorithm.truncation_mask=all",)


def test_named_arms_resolve_to_a_valid_config():
    for name in ("no-mask", "mask-all", "mask-cond", "clip-sym", "no-kl", "calibrated"):
        load_config(RECIPE, list(parse_arm(name).overrides))


def test_temperature_arm_fixes_t_and_turns_calibration_and_monitor_off():
    cfg = load_config(RECIPE, list(parse_arm("T=0.6").overrides))
    t = cfg.algorithm.temperature
    assert (t.initial, t.calibrate, t.monitor_window, t.schedule) == (0.6, False, 0, [])


def test_kl_arm_sets_the_kl_coefficient():
    assert load_config(RECIPE, list(parse_arm("kl=0.001").overrides)).algorithm.kl_coef == 0.001


def test_valued_arm_without_a_number_is_an_error_saying_how_to_write_it():
    with pytest.raises(ArmError, match="T=0.6"):
        parse_arm("T=low")


def test_unknown_arm_names_the_nearest_and_lists_the_valid_ones():
    with pytest.raises(ArmError) as err:
        parse_arm("mask_al")
    assert "did you mean 'mask-all'" in str(err.value)
    assert "no-mask" in str(err.value) and "T=<number>" in str(err.value)


def test_an_arm_given_twice_is_an_error():
    with pytest.raises(ArmError, match="twice"):
        parse_arms("no-mask,mask-all,no-mask")


def test_custom_arm_takes_its_name_and_semicolon_separated_overrides():
    arm = parse_arm("lr2:learner.lr=2e-4;learner.batch_size=8")
    assert (arm.name, arm.overrides) == ("lr2", ("learner.lr=2e-4", "learner.batch_size=8"))


def test_custom_arm_with_a_list_value_survives_the_comma_split():
    arms = parse_arms("no-mask,st:algorithm.temperature.schedule=[[0,1.0],[2,0.8]]")
    assert arms[1].overrides == ("algorithm.temperature.schedule=[[0,1.0],[2,0.8]]",)


def test_custom_arm_name_that_cannot_be_a_folder_is_an_error():
    with pytest.raises(ArmError, match="folder"):
        parse_arm("a/b:learner.lr=1e-4")


def test_preset_arm_sets_algorithm_preset():
    assert parse_arm("grpo").overrides == ("algorithm.preset=grpo",)


def test_preset_arm_overrides_the_recipe_values_the_preset_would_not_fill():
    recipe = {"algorithm": {"kl_coef": 0.0, "eps_high": 0.28}}
    out = resolve_overrides(parse_arm("grpo"), recipe, [])
    cfg = load_config(RECIPE, out)
    assert (cfg.algorithm.kl_coef, cfg.algorithm.eps_high) == (0.001, 0.2)


def test_a_set_of_a_preset_value_wins_over_the_preset():
    out = resolve_overrides(
        parse_arm("grpo"), {"algorithm": {"kl_coef": 0.0}}, ["algorithm.kl_coef=0.01"]
    )
    assert load_config(RECIPE, out).algorithm.kl_coef == 0.01


def test_a_set_of_a_key_the_arm_sets_is_an_error():
    with pytest.raises(ArmError, match="conflicts with arm 'mask-all'"):
        resolve_overrides(parse_arm("mask-all"), {}, ["algorithm.truncation_mask=none"])


def test_plan_names_the_arm_whose_config_does_not_resolve():
    arms = parse_arms("no-mask,bad:algorithm.no_such_key=1")
    with pytest.raises(CompareError, match="arm 'bad'"):
        plan_grid(RECIPE, arms, [0], [], Path("unused"), 1)


def test_plan_refuses_a_set_of_the_seed():
    with pytest.raises(CompareError, match="--seeds"):
        plan_grid(RECIPE, parse_arms("no-mask"), [0], ["seed=4"], Path("unused"), 1)


def test_plan_is_seed_major_with_one_run_dir_per_arm_seed(tmp_path):
    grid = plan_grid(RECIPE, parse_arms("no-mask,mask-all"), [0, 1], [], tmp_path, 1)
    assert [(j.arm, j.seed) for j in grid.jobs] == [
        ("no-mask", 0),
        ("mask-all", 0),
        ("no-mask", 1),
        ("mask-all", 1),
    ]
    assert grid.jobs[3].run_dir == tmp_path / "mask-all" / "seed1"


def test_plan_passes_the_seed_and_the_arm_to_the_launch(tmp_path):
    job = plan_grid(RECIPE, parse_arms("mask-all"), [2], ["max_steps=3"], tmp_path, 1).jobs[0]
    sets = [job.argv[k + 1] for k, a in enumerate(job.argv) if a == "--set"]
    assert sets == ["seed=2", "algorithm.truncation_mask=all", "max_steps=3"]


def test_seeds_count_and_list_forms():
    assert (parse_seeds("3"), parse_seeds("0,5")) == ([0, 1, 2], [0, 5])


def test_seeds_given_twice_is_an_error():
    with pytest.raises(ValueError, match="each once"):
        parse_seeds("1,1")


def test_parallel_auto_runs_as_many_as_the_machines_cpus_fit(tmp_path, monkeypatch):
    """The tiny recipe plans 3 CPUs a run: 2 cores run one at a time, 8 run two at once, and
    never more at once than there are runs."""
    import microcoder.launch.compare.plan as plan

    arms = parse_arms("no-mask,mask-all,mask-cond")
    monkeypatch.setattr(plan.os, "cpu_count", lambda: 2)
    grid = plan_grid(RECIPE, arms, [0], [], tmp_path, None)
    assert len(grid.envs) == 1 and grid.why.startswith("1 at a time (as many as fit")
    monkeypatch.setattr(plan.os, "cpu_count", lambda: 8)
    assert len(plan_grid(RECIPE, arms, [0, 1], [], tmp_path, None).envs) == 2
    monkeypatch.setattr(plan.os, "cpu_count", lambda: 64)
    assert len(plan_grid(RECIPE, arms, [0], [], tmp_path, None).envs) == 3


def test_parallel_auto_on_a_shared_cluster_runs_one_at_a_time(tmp_path):
    arms = parse_arms("no-mask,mask-all")
    grid = plan_grid(RECIPE, arms, [0], ["cluster.address=auto"], tmp_path, None)
    assert len(grid.envs) == 1 and "shared cluster" in grid.why
    with pytest.raises(CompareError, match="--parallel 1"):
        plan_grid(RECIPE, arms, [0], ["cluster.address=auto"], tmp_path, 2)


def test_parallel_number_beyond_the_machine_names_the_number_that_fits(tmp_path, monkeypatch):
    import microcoder.launch.compare.plan as plan

    monkeypatch.setattr(plan.os, "cpu_count", lambda: 8)
    with pytest.raises(CompareError, match="set --parallel 2"):
        plan_grid(RECIPE, parse_arms("no-mask,mask-all,mask-cond"), [0], [], tmp_path, 3)


def test_parallel_argument_takes_auto_or_a_number():
    assert (parse_parallel("auto"), parse_parallel("2")) == (None, 2)
    with pytest.raises(ValueError, match="auto"):
        parse_parallel("many")


def test_plan_names_the_arms_whose_loop_check_cannot_act(tmp_path):
    """The microcoder arm puts the preset's m = 128 back over the recipe's 16: at a 64-token cap
    its loop check cannot act, and the plan says so for that arm alone; a --set fixes it."""
    arms = parse_arms("microcoder,grpo")
    (note,) = plan_grid(RECIPE, arms, [0], [], tmp_path, 1).notes
    assert note.startswith("arm microcoder: algorithm.repeat_window = 128")
    assert "at most 32" in note
    assert plan_grid(RECIPE, arms, [0], ["algorithm.repeat_window=16"], tmp_path, 1).notes == []


def test_runs_side_by_side_get_each_model_built_once_before_they_start(tmp_path, monkeypatch):
    """Two launches warm-starting one missing model folder at once would both train it and
    write over each other: with more than one slot, compare builds each model path first."""
    import microcoder.launch.compare.plan as plan

    built = []
    monkeypatch.setattr(plan, "ensure_model", lambda m, cfg: built.append(m.path))
    monkeypatch.setattr(plan.os, "cpu_count", lambda: 8)
    arms = parse_arms("no-mask,mask-all,other:model.path=elsewhere")
    plan.prepare_models(plan_grid(RECIPE, arms, [0], [], tmp_path, 1), say=lambda _: None)
    assert built == []  # one at a time: the first launch builds it, as by hand
    plan.prepare_models(plan_grid(RECIPE, arms, [0], [], tmp_path, 2), say=lambda _: None)
    assert built == ["runs/tiny-model-warm", "elsewhere"]


def test_the_grid_says_the_seeds_vary_the_prompt_order_unless_a_shuffle_seed_is_set():
    (free,) = plan_grid(RECIPE, parse_arms("no-mask"), [0], [], Path("unused"), 1).variance
    assert free.startswith("the ± over seeds covers") and "the prompt order" in free
    assert "synthetic training and held-out tasks" in free
    assert "not the initial weights" in free
    sets = ["data.shuffle_seed=3"]
    (pinned,) = plan_grid(RECIPE, parse_arms("no-mask"), [0], sets, Path("unused"), 1).variance
    covered, _, same = pinned.partition("; not ")
    assert "prompt order" not in covered and "data.shuffle_seed = 3 fixes it" in same


def test_a_problem_file_recipe_says_the_problems_stay_the_same(tmp_path):
    sets = ["data.source=data/x.jsonl"]
    (text,) = plan_grid(RECIPE, parse_arms("no-mask"), [0], sets, tmp_path, 1).variance
    assert "not the initial weights (every seed starts from model.path), the problems" in text


def test_an_off_policy_arm_for_each_registered_correction_resolves_to_it():
    """`off_policy=NAME` takes its choices from the learner's registry (OFF_POLICY): every
    correction registered there is an arm, and its config runs that correction."""
    from microcoder.learner.algorithm.off_policy import OFF_POLICY

    for name in OFF_POLICY:
        arm = parse_arm(f"off_policy={name}")
        assert arm.overrides == (f"algorithm.off_policy={name}",)
        assert arm.description.startswith(f"off-policy correction {name}: ")
        assert load_config(RECIPE, list(arm.overrides)).algorithm.off_policy == name


def test_the_issues_three_correction_arms_parse_with_folder_safe_names(tmp_path):
    arms = parse_arms("off_policy=none,off_policy=tis,off_policy=mask")
    grid = plan_grid(RECIPE, arms, [0], ["buffer.max_staleness=4"], tmp_path, 1)
    assert [j.run_dir.relative_to(tmp_path).parts[0] for j in grid.jobs] == [
        "off_policy=none",
        "off_policy=tis",
        "off_policy=mask",
    ]


def test_an_unknown_correction_is_refused_naming_the_nearest_and_every_choice():
    with pytest.raises(ArmError) as err:
        parse_arm("off_policy=msk")
    text = str(err.value)
    assert "did you mean 'mask'" in text
    assert "off_policy=NAME with NAME one of none, tis, seq-tis, mask, geo-reject" in text


def test_a_misspelt_choice_prefix_names_the_choice_arm_and_its_choices():
    with pytest.raises(ArmError) as err:
        parse_arm("off-policy=tis")
    assert "did you mean 'off_policy='" in str(err.value)
    assert "off_policy=<none|tis|seq-tis|mask|geo-reject>" in str(err.value)


def test_a_set_of_the_correction_conflicts_with_a_correction_arm():
    with pytest.raises(ArmError, match="conflicts with arm 'off_policy=mask'"):
        resolve_overrides(parse_arm("off_policy=mask"), {}, ["algorithm.off_policy=tis"])


def test_a_correction_arm_without_recomputed_old_logprobs_is_named_before_anything_runs():
    arms = parse_arms("off_policy=none,off_policy=tis")
    sets = ["learner.recompute_old_logprobs=false"]
    with pytest.raises(CompareError, match="arm 'off_policy=tis' does not resolve") as err:
        plan_grid(RECIPE, arms, [0], sets, Path("unused"), 1)
    assert "recompute_old_logprobs = true" in str(err.value)

"""The issue's test: a two-arm, one-seed, three-step `microcoder compare` on the tiny config
writes compare.json and the plots, through real launches (one shared by the module's tests),
and `--resume` on its folder runs nothing again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from launch_testing.batch import batched_launch

# the warm start (built here when this module is the batch's first to need it), then the compare
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

ARGS = [
    "configs/tiny-cpu.toml",
    "--arms",
    "no-mask,mask-all",
    "--seeds",
    "1",
    "--set",
    "max_steps=3",
    "--set",
    "eval.every=3",  # held-out points at steps 0 and 3
    "--set",
    "eval.problems=16",
    "--set",
    "learner.batch_size=8",
    "--set",
    "monitor.tensorboard=false",
    "--set",
    "monitor.dashboard_port=0",
    "--set",
    "generator.enforce_eager=true",  # no torch.compile: both launches start sooner
]


def compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "microcoder", "compare", *args],
        capture_output=True,
        text=True,
        timeout=1500,
    )


def compare_args(out: Path, model_dir: Path) -> list[str]:
    """The compare on the session's warm-started model (not runs/: a test writes no folder
    of the checkout) into `out`."""
    return [*ARGS, "--set", f'model.path="{model_dir}"', "--out", str(out)]


compared = batched_launch(
    __file__, "compare", compare_args, command="compare", model="warm_model_dir"
)
"""(the compare's result, its --out folder): one command, run beside the other batched modules'
launches (launch_testing.batch)."""


def test_compare_exits_zero_with_both_arm_seeds_finished(compared):
    proc, out = compared
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads((out / "compare.json").read_text())["runs"]
    assert [(r["arm"], r["status"]) for r in runs] == [
        ("no-mask", "finished"),
        ("mask-all", "finished"),
    ]


def test_each_run_has_three_steps_of_every_step_metric(compared):
    _, out = compared
    for run in json.loads((out / "compare.json").read_text())["runs"]:
        for key in ("reward_mean", "response_len_mean", "truncated_frac", "diversity"):
            assert [p[0] for p in run["series"][key]] == [1, 2, 3], (run["arm"], key)
        assert [p[0] for p in run["series"]["heldout_pass_rate"]] == [0, 3]


def test_each_arm_ran_its_own_truncation_mask(compared):
    _, out = compared
    for arm, mask in (("no-mask", "none"), ("mask-all", "all")):
        assert f'truncation_mask = "{mask}"' in (out / arm / "seed0" / "config.toml").read_text()


def test_the_plots_are_written_as_pngs(compared):
    _, out = compared
    for name in ("heldout_pass_rate", "reward_mean", "response_len_mean", "curves"):
        assert (out / "plots" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_the_table_has_each_arms_final_held_out_pass_rate(compared):
    _, out = compared
    summary = json.loads((out / "compare.json").read_text())["summary"]
    md = (out / "compare.md").read_text()
    for arm in ("no-mask", "mask-all"):
        final = summary[arm]["heldout_pass_rate"]
        assert final["n"] == 1
        assert f"| {arm} | {final['mean']:.3f} ± 0.000 |" in md


def test_resume_on_the_finished_folder_skips_both_and_rewrites_the_report(compared):
    proc, out = compared
    (out / "compare.json").unlink()
    model = next(a for a in proc.args if a.startswith("model.path="))
    proc = compare(*ARGS, "--set", model, "--out", str(out), "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count(": skipped (--resume: finished earlier in ") == 2
    assert "starting" not in proc.stderr
    assert (out / "compare.json").exists()

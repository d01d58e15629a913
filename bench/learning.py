"""`microcoder bench learning`: does the embedded default learn, and how sure is that?

Each round launches the tiny recipe twice on the same warm-started model, through the real
`microcoder launch`: once as shipped and once with `learner.lr = 0` (the paired control: the
same pipeline, sampling and evaluation, no learning). Both runs go through `criterion`, the
pass/fail rule that tests/launch/test_learning.py asserts in `make test-all`. The bench repeats
rounds (one seed each) and reports how often the trained run passed (1 - false-failure rate),
how often the control passed (false passes), and each criterion's margin.

The criterion (all three must hold):
- greedy held-out pass rate (T = 0, the 160 held-out problems) rises by >= 0.10 from step 0 to
  the last step: with lr = 0 the weights do not change, so the greedy rate does not either;
- sampled held-out pass rate (T = 1.0) rises by >= 0.10;
- the batch reward of the last 10 steps exceeds the first 10 steps' by >= 0.08, all sampled at
  one temperature: the run pins it (the monitor is off, `monitor_window = 0`; calibration still
  chooses it), because a reward measured at a raised temperature is not comparable (a raised T
  lowers the reward while the policy improves; the monitor is tested in tests/live).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DESCRIPTION = (
    "the embedded default learns: N rounds of a trained and an lr=0 launch of the tiny recipe, "
    "pass counts of the learning criterion and its margins"
)

STEPS = 30
"""Learner steps per launch."""
WINDOW = 10
"""Steps averaged at each end for the batch-reward criterion."""
MARGINS = {"greedy": 0.10, "heldout": 0.10, "reward": 0.08}
"""How much each figure must rise for the criterion to hold."""
SETTINGS = {
    "max_steps": str(STEPS),
    "eval.every": str(STEPS),  # held-out at step 0 and at the last step
    "algorithm.temperature.monitor_window": "0",  # one sampling temperature for every step
    "monitor.dashboard_port": "0",
    "monitor.tensorboard": "false",
}


def criterion(run_dir: Path) -> dict[str, Any]:
    """The learning criterion on a finished run directory: each figure's rise, its margin
    over the required rise (`*_margin`, > 0 when it holds) and `passed` (all three hold)."""
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in recs if r["kind"] == "step"]
    evals = [r for r in recs if r["kind"] == "eval"]
    first = evals[0]
    last = evals[-1]
    rewards = [r["reward_mean"] for r in steps]
    rises = {
        "greedy": last["heldout_greedy_pass_rate"] - first["heldout_greedy_pass_rate"],
        "heldout": last["heldout_pass_rate"] - first["heldout_pass_rate"],
        "reward": sum(rewards[-WINDOW:]) / WINDOW - sum(rewards[:WINDOW]) / WINDOW,
    }
    out: dict[str, Any] = {
        "steps": len(steps),
        "evals": len(evals),
        "temperatures": sorted({r["temperature"] for r in steps}),
        "heldout": [first["heldout_pass_rate"], last["heldout_pass_rate"]],
        "greedy": [first["heldout_greedy_pass_rate"], last["heldout_greedy_pass_rate"]],
        "reward": [sum(rewards[:WINDOW]) / WINDOW, sum(rewards[-WINDOW:]) / WINDOW],
    }
    for name, rise in rises.items():
        out[f"{name}_rise"] = round(rise, 4)
        out[f"{name}_margin"] = round(rise - MARGINS[name], 4)
    out["passed"] = (
        len(steps) >= 2 * WINDOW
        and len(out["temperatures"]) == 1
        and all(out[f"{n}_margin"] >= 0 for n in MARGINS)
    )
    return out


def finished(run_dir: Path) -> bool:
    """A launch in `run_dir` ran all STEPS steps and both evaluations."""
    try:
        got = criterion(run_dir)
    except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError):
        return False
    return got["steps"] == STEPS and got["evals"] == 2


ARMS = {"trained": (), "lr0": ("--set", "learner.lr=0")}
"""The two arms of a round and the `launch` arguments each adds: the recipe as shipped, and its
paired control with no learning (the same pipeline, sampling and evaluation)."""
GAPS = {"greedy": 0.10, "heldout": 0.10}
"""How far the trained arm's last held-out pass rates (greedy, sampled) must end above its
control's (`beats_control`)."""
SAME_START = 4 / 160
"""How far apart the two arms' step-0 greedy rates may be and still count as one start (the same
model and held-out set; a greedy decode in another batch may round differently)."""


def beats_control(trained: dict[str, Any], control: dict[str, Any]) -> dict[str, Any]:
    """The paired comparison of two `criterion` results: both arms start at the same greedy
    rate (`same_start`), and the trained arm ends `GAPS` above the control on the greedy and the
    sampled held-out pass rates (`*_gap`: its last rate minus the control's). `passed`: all
    hold and the control itself fails the criterion."""
    out: dict[str, Any] = {"start_diff": round(abs(trained["greedy"][0] - control["greedy"][0]), 4)}
    out["same_start"] = out["start_diff"] <= SAME_START
    for name in GAPS:
        out[f"{name}_gap"] = round(trained[name][1] - control[name][1], 4)
    out["passed"] = (
        out["same_start"]
        and not control["passed"]
        and all(out[f"{n}_gap"] >= need for n, need in GAPS.items())
    )
    return out


def launch_args(model_dir: Path, run_dir: Path, *extra: str, seed: int = 0) -> list[str]:
    """The arguments of `microcoder launch` for one arm: the tiny recipe on `model_dir` for STEPS
    steps into `run_dir`, then `extra` (an arm's `ARMS` entry)."""
    sets = {**SETTINGS, "model.path": f'"{model_dir}"', "seed": str(seed)}
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    return ["configs/tiny-cpu.toml", "--run-dir", str(run_dir), *args, *extra]


def launch(
    model_dir: Path, run_dir: Path, *extra: str, seed: int = 0
) -> subprocess.CompletedProcess:
    """One `microcoder launch` of the tiny recipe on `model_dir` for STEPS steps, to its end."""
    cmd = [sys.executable, "-m", "microcoder", "launch"]
    return subprocess.run(
        [*cmd, *launch_args(model_dir, run_dir, *extra, seed=seed)], capture_output=True, text=True
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, default=5, help="trained + lr=0 launch pairs (default 5)")
    p.add_argument(
        "--model",
        default="runs/tiny-model-warm",
        help="warm-started tiny model folder (built there first when missing)",
    )
    p.add_argument("--out", default=None, help="keep the run directories here (default: temp)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="reuse the finished runs already in --out (a failed or partial one runs again)",
    )


def _ensure_model(model: Path) -> None:
    if (model / "warmstart.json").exists():
        return
    print(f"building the warm-started tiny model in {model} (~1-2 min)", file=sys.stderr)
    cmd = [sys.executable, "-m", "microcoder", "tiny-model", "--warmstart", "--out", str(model)]
    subprocess.run(cmd, check=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    model = Path(args.model).resolve()
    _ensure_model(model)
    out = Path(args.out or tempfile.mkdtemp(prefix="mc-bench-learning-"))
    rounds = []
    for i in range(args.rounds):
        row: dict[str, Any] = {"seed": i}
        for arm, extra in ARMS.items():
            t0 = time.monotonic()
            run_dir = out / f"{arm}-{i}"
            if args.resume and finished(run_dir):
                row[arm] = {**criterion(run_dir), "wall_s": None, "reused": True}
                print(f"round {i + 1}/{args.rounds} {arm:>7}: reused {run_dir}", file=sys.stderr)
                continue
            shutil.rmtree(run_dir, ignore_errors=True)
            res = launch(model, run_dir, *extra, seed=i)
            if res.returncode != 0:
                raise SystemExit(
                    f"bench learning: the {arm} launch of round {i} exited {res.returncode}; "
                    f"its output ends:\n{(res.stdout + res.stderr)[-2000:]}"
                )
            row[arm] = {**criterion(run_dir), "wall_s": round(time.monotonic() - t0)}
            c = row[arm]
            print(
                f"round {i + 1}/{args.rounds} {arm:>7}: passed={c['passed']} "
                f"greedy {c['greedy_rise']:+.3f} held-out {c['heldout_rise']:+.3f} "
                f"reward {c['reward_rise']:+.3f} ({c['wall_s']} s)",
                file=sys.stderr,
            )
        rounds.append(row)
    return {
        "rounds": rounds,
        "trained_passed": sum(r["trained"]["passed"] for r in rounds),
        "control_passed": sum(r["lr0"]["passed"] for r in rounds),
        "min_trained_margin": {
            n: min(r["trained"][f"{n}_margin"] for r in rounds) for n in MARGINS
        },
        "max_control_rise": {n: max(r["lr0"][f"{n}_rise"] for r in rounds) for n in MARGINS},
        "required_rise": MARGINS,
        "run_dirs": str(out),
    }


def format_table(r: dict[str, Any]) -> str:
    lines = [
        f"{'round':<6}{'arm':<9}{'passed':<8}{'greedy rise':>12}{'held-out rise':>15}"
        f"{'reward rise':>13}{'T':>7}",
    ]
    for row in r["rounds"]:
        for arm in ("trained", "lr0"):
            c = row[arm]
            t = ",".join(f"{x:g}" for x in c["temperatures"])
            lines.append(
                f"{row['seed']:<6}{arm:<9}{c['passed']!s:<8}{c['greedy_rise']:>+12.3f}"
                f"{c['heldout_rise']:>+15.3f}{c['reward_rise']:>+13.3f}{t:>7}"
            )
    n = len(r["rounds"])
    req = r["required_rise"]
    lines += [
        "",
        f"trained passed {r['trained_passed']}/{n}; lr=0 control passed {r['control_passed']}/{n}",
        "required rise: " + ", ".join(f"{k} {v:+.2f}" for k, v in req.items()),
        "smallest trained margin: "
        + ", ".join(f"{k} {v:+.3f}" for k, v in r["min_trained_margin"].items()),
        "largest control rise: "
        + ", ".join(f"{k} {v:+.3f}" for k, v in r["max_control_rise"].items()),
    ]
    return "\n".join(lines)

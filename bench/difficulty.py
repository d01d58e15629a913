"""`microcoder bench difficulty`: how much generation dynamic filtering discards, with and without
online difficulty (issue 45: `data.retire_solved_after`, `data.skip_unsolved_after`).

Two launches of the tiny recipe through the real `microcoder launch`, the same seed, steps and
problems: `off` as shipped, `on` with the settings of `--on` (default
`data.retire_solved_after=2`). The problems are a small problem file, the first `--problems`
tasks of the synthetic family's train split written as JSONL, so each problem comes up in many
epochs within a few steps (the whole family is too large for a problem to be seen K times in a
short run). From the last step record of each run's metrics.jsonl (the buffer's cumulative
counters) it reports: groups generated and judged that reached the learner (`consumed`),
discarded by dynamic filtering (`filtered`), dropped by the staleness gate (`dropped_stale`),
trained on, dynamic filtering's share of the consumed groups (`discarded_share`, the issue's
figure) and both drops' share of everything generated (`all_discarded_share`), generated groups
and response tokens per trained group, and the retired / deferred counts. One launch per arm: the share moves by a few points
between seeds (the sampling differs), so read a difference of that size as noise.
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
    "dynamic filtering's discarded share of generated groups, with and without online "
    "difficulty (retire_solved_after / skip_unsolved_after): two tiny launches"
)

SETTINGS = {
    "eval.every": "0",
    "monitor.dashboard_port": "0",
    "monitor.tensorboard": "false",
}


def write_problems(path: Path, n: int, seed: int = 0) -> Path:
    """The first `n` train tasks of the synthetic family as a JSONL problem file."""
    from microcoder.data.synthetic.tasks import generate_tasks

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(p.to_json() + "\n" for p in generate_tasks(seed, "train", n=n)))
    return path


def summary(run_dir: Path) -> dict[str, Any]:
    """The figures of one finished run from its metrics.jsonl."""
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    steps = [r for r in recs if r.get("kind") == "step"]
    buf = steps[-1]["buffer"]
    consumed = buf["consumed"]
    filtered = buf["filtered"]
    trained = consumed - filtered
    stale = buf.get("dropped_stale", 0)
    return {
        "steps": len(steps),
        "issued": buf["issued"],
        "consumed": consumed,
        "filtered": filtered,
        "dropped_stale": stale,
        "trained": trained,
        "discarded_share": round(filtered / consumed, 4) if consumed else None,
        "all_discarded_share": (
            round((filtered + stale) / (consumed + stale), 4) if consumed + stale else None
        ),
        "groups_per_trained": round(consumed / trained, 3) if trained else None,
        "tokens_per_trained": round(buf["response_tokens_in"] / trained, 1) if trained else None,
        "retired": buf.get("retired", 0),
        "deferred": buf.get("deferred", 0),
        "reward_mean": round(sum(r["reward_mean"] for r in steps) / len(steps), 4),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=20, help="learner steps per launch (default 20)")
    p.add_argument("--problems", type=int, default=48, help="synthetic problems (default 48)")
    p.add_argument("--seed", type=int, default=0, help="the run seed of both launches")
    p.add_argument(
        "--on",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="settings of the `on` arm (repeatable; default data.retire_solved_after=2)",
    )
    p.add_argument("--out", default=None, help="keep the run directories here (default: temp)")
    p.add_argument("--resume", action="store_true", help="reuse a finished run already in --out")


def _finished(run_dir: Path, steps: int) -> bool:
    try:
        return summary(run_dir)["steps"] == steps
    except (OSError, ValueError, KeyError, IndexError):
        return False


def run(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out or tempfile.mkdtemp(prefix="mc-bench-difficulty-")).resolve()
    problems = write_problems(out / f"problems{args.problems}.jsonl", args.problems)
    sets = {**SETTINGS, "max_steps": str(args.steps), "seed": str(args.seed)}
    sets["data.source"] = f'"{problems}"'
    base = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    on = args.on or ["data.retire_solved_after=2"]
    arms = {"off": [], "on": [a for kv in on for a in ("--set", kv)]}
    result: dict[str, Any] = {"problems": args.problems, "steps": args.steps, "settings": on}
    for arm, extra in arms.items():
        run_dir = out / arm
        t0 = time.monotonic()
        if args.resume and _finished(run_dir, args.steps):
            result[arm] = {**summary(run_dir), "wall_s": None, "reused": True}
            continue
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, "-m", "microcoder", "launch", "configs/tiny-cpu.toml"]
        res = subprocess.run(
            [*cmd, "--run-dir", str(run_dir), *base, *extra], capture_output=True, text=True
        )
        if res.returncode != 0:
            raise SystemExit(
                f"bench difficulty: the {arm} launch exited {res.returncode}; its output "
                f"ends:\n{(res.stdout + res.stderr)[-2000:]}"
            )
        result[arm] = {**summary(run_dir), "wall_s": round(time.monotonic() - t0)}
        print(f"{arm}: {result[arm]}", file=sys.stderr)
    result["run_dirs"] = str(out)
    return result


def format_table(r: dict[str, Any]) -> str:
    keys = (
        "steps",
        "issued",
        "consumed",
        "filtered",
        "dropped_stale",
        "trained",
        "discarded_share",
        "all_discarded_share",
        "groups_per_trained",
        "tokens_per_trained",
        "retired",
        "deferred",
        "reward_mean",
        "wall_s",
    )
    lines = [
        f"{r['problems']} synthetic problems, {r['steps']} steps; on = {' '.join(r['settings'])}",
        f"{'':>20} {'off':>10} {'on':>10}",
    ]
    for k in keys:
        lines.append(f"{k:>20} {r['off'].get(k)!s:>10} {r['on'].get(k)!s:>10}")
    lines.append(f"run directories: {r['run_dirs']}")
    return "\n".join(lines)

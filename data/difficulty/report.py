"""The difficulty filter's report folder: report.json, report.md and two PNG histograms of the
pass rate (measured or predicted), before and after selection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from microcoder.data.difficulty.pipeline import FilterResult

HISTOGRAMS = ("pass_rate_before.png", "pass_rate_after.png")


def write_report(folder: Path, report: dict[str, Any], result: FilterResult) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (folder / "report.md").write_text(render_markdown(report))
    kept = {p.id for p in result.selection.kept}
    before = [(s.rate, s.measured) for s in result.scores.values()]
    after = [(s.rate, s.measured) for i, s in result.scores.items() if i in kept]
    for name, values, title in (
        (HISTOGRAMS[0], before, f"before selection ({len(before)} scored)"),
        (HISTOGRAMS[1], after, f"after selection ({len(after)} kept)"),
    ):
        _histogram(folder / name, values, title, result.settings["samples"])


def render_markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [
        "# Difficulty filter",
        "",
        f"{report['problems']} problems, {report['measured']} measured ({s['samples']} samples "
        f"each), {report['predicted']} predicted; kept {report['kept']} "
        f"(band {s['keep'][0]}-{s['keep'][1]}, never-solved <= {s['max_unsolved_share']:.0%}, "
        f"seed {s['seed']}).",
        "",
        "| band | before | after |",
        "|---|---:|---:|",
        *(f"| {b['band']} | {b['before']} | {b['after']} |" for b in report["bands"]),
        "",
        "Removed: "
        + (", ".join(f"{k} {v}" for k, v in sorted(report["removed_by_reason"].items())) or "none"),
        "",
    ]
    a = report["predictor_agreement"]
    if a:
        rho = "n/a (constant)" if a["spearman"] is None else f"{a['spearman']:.3f}"
        lines += [
            f"Predictor (metadata only), held-out {a['test']} of {a['train'] + a['test']} "
            f"(seed {a['seed']}): Spearman {rho}, MAE {a['mae']:.3f} "
            f"(predicting the mean: {a['baseline_mae']:.3f}).",
            "",
        ]
    return "\n".join(lines)


def _histogram(path: Path, values: list[tuple[float, bool]], title: str, samples: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = [i / samples - 0.5 / samples for i in range(samples + 2)]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    measured = [r for r, m in values if m]
    predicted = [r for r, m in values if not m]
    ax.hist(
        [measured, predicted],
        bins=edges,
        stacked=True,
        label=[f"measured ({len(measured)})", f"predicted ({len(predicted)})"],
        color=["tab:blue", "tab:orange"],
    )
    ax.set_xlabel(f"pass rate ({samples} samples)")
    ax.set_ylabel("problems")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)

"""The report of `microcoder data build`: report.json, report.md and before/after histograms.

report.json is `{"kept": N, "stages": [{"name", "in", "out"}], "removed": [{"id", "source",
"reason", "match"}]}` with these fields beside them: each stage's `skipped` and `by_source`
(kept per source), each removal's `detail`, `renamed` (ids changed because two sources shared
them), `files` (rows and rejects per source file), `counts` (problems without references,
unverified, undated, eval items matched, ...) and `histograms` (the PNG file names).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from microcoder.data.corpus.build import REASONS, BuildResult
from microcoder.data.formats.dates import parse_date
from microcoder.data.problem import Problem

HISTOGRAMS = ("difficulty", "tests", "statement_length", "date")


def report_dict(result: BuildResult, histograms: list[str] | None = None) -> dict:
    """report.json's content (see module doc)."""
    return {
        "kept": len(result.kept),
        "stages": [
            {
                "name": s.name,
                "in": s.n_in,
                "out": s.n_out,
                "skipped": s.skipped,
                "by_source": s.by_source,
            }
            for s in result.stages
        ],
        "removed": [
            {
                "id": r.id,
                "source": r.source,
                "reason": r.reason,
                "match": r.match,
                "detail": r.detail,
            }
            for r in result.removed
        ],
        "renamed": result.renamed,
        "files": result.files,
        "counts": result.counts,
        "histograms": histograms or [],
    }


def report_markdown(result: BuildResult) -> str:
    """report.md: counts per stage, kept per source after each stage, removals per source."""
    lines = ["# Data build report", "", f"Kept **{len(result.kept)}** problems.", ""]
    lines += ["| stage | in | out | removed | reason |", "|---|---:|---:|---:|---|"]
    for s in result.stages:
        gone = "skipped" if s.skipped else str(s.n_in - s.n_out)
        lines.append(f"| {s.name} | {s.n_in} | {s.n_out} | {gone} | {REASONS[s.name]} |")
    sources = sorted({p.source for p in result.before} | {r.source for r in result.removed})
    lines += ["", "Kept per source after each stage:", ""]
    lines.append("| source | loaded | " + " | ".join(s.name for s in result.stages) + " |")
    lines.append("|---|" + "---:|" * (len(result.stages) + 1))
    loaded = Counter(p.source for p in result.before)
    invalid = Counter(r.source for r in result.removed if r.reason == "invalid")
    for src in sources:
        cells = [str(loaded[src] + invalid[src])] + [
            str(s.by_source.get(src, 0)) for s in result.stages
        ]
        lines.append(f"| {src} | " + " | ".join(cells) + " |")
    by = Counter((r.source, r.reason) for r in result.removed)
    reasons = [REASONS[s.name] for s in result.stages]
    lines += ["", "Removed per source and reason:", ""]
    lines += ["| source | " + " | ".join(reasons) + " |", "|---|" + "---:|" * len(reasons)]
    for src in sources:
        lines.append(f"| {src} | " + " | ".join(str(by[(src, r)]) for r in reasons) + " |")
    if result.counts:
        lines += ["", "Other counts:", ""]
        lines += [f"- {k}: {v}" for k, v in result.counts.items()]
    if result.renamed:
        lines += ["", f"{len(result.renamed)} ids renamed (shared by two sources), e.g. "]
        lines += [f"- `{r['from']}` -> `{r['to']}` ({r['file']})" for r in result.renamed[:10]]
    lines += ["", "Histograms (before = validated input, after = kept): "]
    lines += [f"![{h}]({h}.png)" for h in HISTOGRAMS]
    return "\n".join(lines) + "\n"


def _year(p: Problem) -> str:
    period = parse_date(p.date)
    return str(period.first.year) if period else "none"


def _categorical(ax, before: list[str], after: list[str], title: str) -> None:
    keys = sorted(set(before) | set(after))
    cb = Counter(before)
    ca = Counter(after)
    xs = range(len(keys))
    ax.bar([x - 0.2 for x in xs], [cb[k] for k in keys], width=0.4, label="before")
    ax.bar([x + 0.2 for x in xs], [ca[k] for k in keys], width=0.4, label="after")
    ax.set_xticks(list(xs), keys, rotation=45 if len(keys) > 6 else 0)
    ax.set_title(title)
    ax.legend()


def _numeric(ax, before: list[float], after: list[float], title: str, xlabel: str) -> None:
    import numpy as np

    values = before + after
    lo = max(min(values, default=1), 1)
    hi = max(max(values, default=1), 2)
    bins = np.geomspace(lo, hi, 30)
    ax.hist([before, after], bins=bins, label=["before", "after"])
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend()


def plot_histograms(before: list[Problem], after: list[Problem], folder: Path) -> list[str]:
    """difficulty.png, tests.png, statement_length.png, date.png; their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for name in HISTOGRAMS:
        fig, ax = plt.subplots(figsize=(7, 4))
        if name == "difficulty":
            diff = lambda ps: [p.difficulty or "none" for p in ps]  # noqa: E731
            _categorical(ax, diff(before), diff(after), "difficulty")
        elif name == "date":
            _categorical(ax, [_year(p) for p in before], [_year(p) for p in after], "date (year)")
        elif name == "tests":
            n = lambda ps: [len(p.tests) for p in ps]  # noqa: E731
            _numeric(ax, n(before), n(after), "tests per problem", "tests")
        else:
            n = lambda ps: [len(p.prompt) for p in ps]  # noqa: E731
            _numeric(ax, n(before), n(after), "statement length", "characters")
        fig.tight_layout()
        fig.savefig(folder / f"{name}.png", dpi=80)
        plt.close(fig)
        names.append(f"{name}.png")
    return names


def write_report(result: BuildResult, folder: str | Path) -> list[Path]:
    """Write report.json, report.md and the PNGs into `folder` (created); the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pngs = plot_histograms(result.before, result.kept, folder)
    (folder / "report.json").write_text(json.dumps(report_dict(result, pngs), indent=1) + "\n")
    (folder / "report.md").write_text(report_markdown(result))
    return [folder / "report.json", folder / "report.md", *(folder / p for p in pngs)]

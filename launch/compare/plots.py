"""Training curves of a comparison, in the manner of the paper's figures: one PNG per metric
(plots/<metric>.png) and all of them in one grid (plots/curves.png). Each arm is a line, the
mean over its finished seeds at each step, in a band from the seeds' min to their max; x is the
training step. Metrics no run logged are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from microcoder.launch.compare.metrics import METRICS, Band, seed_band
from microcoder.launch.compare.runner import COUNTED


def arm_bands(report: dict[str, Any], key: str) -> list[tuple[str, Band, int]]:
    """(arm, band, seeds) for each arm with points of metric `key` in its finished runs."""
    out = []
    for arm in report["arms"]:
        runs = [r for r in report["runs"] if r["arm"] == arm["name"] and r["status"] in COUNTED]
        curves = [[(int(s), float(v)) for s, v in r["series"][key]] for r in runs]
        curves = [c for c in curves if c]
        if curves:
            out.append((arm["name"], seed_band(curves), len(curves)))
    return out


def _draw(ax, key: str, bands: list[tuple[str, Band, int]]) -> None:
    metric = METRICS[key]
    for k, (name, band, n) in enumerate(bands):
        color = f"C{k % 10}"
        marker = "o" if len(band.steps) <= 12 else None
        ax.plot(band.steps, band.mean, color=color, marker=marker, ms=3, label=f"{name} (n={n})")
        if n > 1:
            ax.fill_between(band.steps, band.low, band.high, color=color, alpha=0.2, lw=0)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(metric.title)
    ax.set_xlabel("training step")
    ax.set_ylabel(metric.label)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def plot_all(report: dict[str, Any], folder: Path) -> list[Path]:
    """Write the PNGs; returns their paths (per-metric ones first, then curves.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    drawn = {key: b for key in METRICS if (b := arm_bands(report, key))}
    paths = []
    for key, bands in drawn.items():
        fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
        _draw(ax, key, bands)
        fig.tight_layout()
        path = folder / f"{key}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    if drawn:
        cols = 3
        rows = (len(drawn) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), dpi=100, squeeze=False)
        for ax, (key, bands) in zip(axes.flat, drawn.items(), strict=False):
            _draw(ax, key, bands)
        for ax in list(axes.flat)[len(drawn) :]:
            ax.set_visible(False)
        fig.suptitle(f"microcoder compare: {report['recipe']} (mean over seeds, band min–max)")
        fig.tight_layout()
        path = folder / "curves.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths

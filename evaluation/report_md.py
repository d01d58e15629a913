"""report.md: the report as readable tables (the paper's platform x difficulty table, one column
per k and budget, then one row per budget)."""

from __future__ import annotations

from typing import Any

BUDGET_NOTE = (
    "Each sample is generated once at the largest budget; at a smaller budget B a response of "
    "more than B tokens is cut to its first B tokens and judged again. The first B tokens of a "
    "sample are distributed exactly like a sample drawn with max_tokens = B, so each column "
    "equals a separate run at that budget."
)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _budget_name(b: int | None) -> str:
    if b is None:
        return "given"
    return f"{b // 1024}K" if b % 1024 == 0 else str(b)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def group_table(report: dict[str, Any]) -> list[str]:
    """Rows (platform, difficulty), columns pass@k at each budget (percent)."""
    ks = [str(k) for k in report["k"]]
    budgets = report["by_budget"]
    header = ["platform", "difficulty", "problems"] + [
        f"pass@{k} {_budget_name(b['max_tokens'])}" for k in ks for b in budgets
    ]
    rows = []
    for i, g in enumerate(report["by_group"]):
        cells = [_pct(b["by_group"][i]["pass_at_k"][k]) for k in ks for b in budgets]
        rows.append([g["platform"], g["difficulty"], str(g["problems"]), *cells])
    overall = [_pct(b["pass_at_k"][k]) for k in ks for b in budgets]
    rows.append(["**all**", "**all**", str(report["problems"]), *overall])
    return _table(header, rows)


def budget_table(report: dict[str, Any]) -> list[str]:
    ks = [str(k) for k in report["k"]]
    header = ["max_tokens", *(f"pass@{k}" for k in ks), "truncated", "samples", "verdicts"]
    rows = []
    for b in report["by_budget"]:
        trunc = b["truncation_rate"]
        verdicts = " ".join(f"{v}:{n}" for v, n in b["verdicts"].items())
        rows.append(
            [
                "given" if b["max_tokens"] is None else str(b["max_tokens"]),
                *(_pct(b["pass_at_k"][k]) for k in ks),
                "-" if trunc is None else f"{100 * trunc:.1f}%",
                str(b["samples"]),
                verdicts,
            ]
        )
    return _table(header, rows)


TURN_NOTE = (
    "Each sample is a trajectory: after a turn whose program fails the environment's check "
    "(repair: the visible tests) the model gets the feedback and answers again. The figure after "
    "turn k judges turn k's program (the last turn's when the trajectory ended earlier) on all "
    "tests; turn 1 is the single-turn figure."
)


def turn_table(report: dict[str, Any]) -> list[str]:
    """One row per turn of a `--max-turns` evaluation: pass@k after it (percent)."""
    ks = [str(k) for k in report["k"]]
    header = ["after turn", *(f"pass@{k}" for k in ks), "truncated", "verdicts"]
    rows = []
    for t in report["by_turn"]:
        trunc = t["truncation_rate"]
        label = f"{t['turn']} (single turn)" if t["turn"] == 1 else str(t["turn"])
        rows.append(
            [
                label,
                *(_pct(t["pass_at_k"][k]) for k in ks),
                "-" if trunc is None else f"{100 * trunc:.1f}%",
                " ".join(f"{v}:{n}" for v, n in t["verdicts"].items()),
            ]
        )
    return _table(header, rows)


def render_markdown(report: dict[str, Any]) -> str:
    """The whole report.md (figures in percent)."""
    s = report.get("settings", {})
    lines = ["# Evaluation report", ""]
    for label, key in (
        ("model", "model"),
        ("problems file", "problems_file"),
        ("generations file", "generations_file"),
    ):
        if s.get(key):
            lines.append(f"- {label}: `{s[key]}`")
    lines.append(
        f"- {report['problems']} problems, {report['samples_per_problem']} samples each"
        + (
            f", T = {s['temperature']:g}, top_p = {s['top_p']:g}"
            if s.get("temperature") is not None
            else ""
        )
    )
    if report.get("selection"):
        lines.append(f"- selection: {report['selection']['summary']}")
    skipped = report.get("skipped_prompts") or {}
    if skipped.get("count"):
        lines.append(
            f"- {skipped['count']} prompt(s) over {skipped.get('max_prompt_tokens')} tokens "
            "skipped (ids in report.json `skipped_prompts`)"
        )
    if report.get("dropped_k"):
        lines.append(f"- pass@k not reported for k = {report['dropped_k']} (k > samples)")
    if report.get("sandbox_faults"):
        lines.append(f"- {report['sandbox_faults']} sandbox fault(s) (SE) counted as failures")
    lines += ["", "## pass@k by platform and difficulty (%)", "", *group_table(report)]
    if report.get("by_turn"):
        lines += ["", "## pass@k after each turn (%)", "", *turn_table(report), "", TURN_NOTE]
    lines += ["", "## By budget", "", *budget_table(report)]
    if len(report["by_budget"]) > 1:
        lines += ["", BUDGET_NOTE]
    return "\n".join(lines) + "\n"

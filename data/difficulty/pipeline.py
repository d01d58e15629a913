"""The difficulty filter's pure pipeline (`microcoder data filter`, issue 18): measured rates in,
a calibrated predictor, the selection, the outputs. The measuring (model samples through the
eval path) is launch/jobs/data_filter.py's, since data/ may not import launch/ or actors/.

    rules = Rules(samples=K, keep=(0.0, 0.9), max_unsolved_share=0.2, seed=0)
    result = filter_problems(problems, rates, rules, predict_rest=False)
    write_outputs(result, out="filtered.jsonl", report_dir="filter-report")

Pieces: data/difficulty/rates.py (the rates file and the planner), data/difficulty/predict.py
(features, predictor, agreement), data/difficulty/select.py (the rules), data/difficulty/report.py
(report.json and the histograms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from microcoder.data.difficulty.predict import Agreement, agreement, fit_predictor
from microcoder.data.difficulty.rates import PassRate
from microcoder.data.difficulty.report import write_report
from microcoder.data.difficulty.select import Rules, Score, Selection, select
from microcoder.data.problem import Problem


@dataclass
class FilterResult:
    """Everything the filter decided, for the outputs and the caller's summary."""

    problems: list[Problem]
    """The input problems, in order."""
    scores: dict[str, Score]
    """Rate per scored problem (measured or predicted)."""
    selection: Selection
    """What was kept and removed."""
    agreement: Agreement | None
    """Predictor agreement on a held-out part of the measured problems (None: under 4)."""
    settings: dict[str, Any]
    """samples, keep, max_unsolved_share, seed, predict_rest."""


def filter_problems(
    problems: Sequence[Problem],
    rates: dict[str, PassRate],
    rules: Rules,
    predict_rest: bool = False,
) -> FilterResult:
    """Score every problem (measured where `rates` has it, else predicted if `predict_rest`),
    report the predictor's agreement on the measured ones, and select."""
    measured = [p for p in problems if p.id in rates]
    passed = [rates[p.id].passed for p in measured]
    drawn = [rates[p.id].samples for p in measured]
    scores = {p.id: Score(rates[p.id].rate, True) for p in measured}
    agree = agreement(measured, passed, drawn, rules.seed) if measured else None
    rest = [p for p in problems if p.id not in rates]
    if predict_rest and rest:
        if not measured:
            raise ValueError("--predict-rest needs measured problems to fit the predictor on")
        model = fit_predictor(measured, passed, drawn)
        for p, r in zip(rest, model.predict(rest), strict=True):
            scores[p.id] = Score(float(r), False)
    sel = select(problems, scores, rules)
    settings = {**asdict(rules), "keep": list(rules.keep), "predict_rest": predict_rest}
    return FilterResult(list(problems), scores, sel, agree, settings)


def report_dict(result: FilterResult) -> dict[str, Any]:
    """report.json's content."""
    sel = result.selection
    measured = sum(s.measured for s in result.scores.values())
    return {
        "problems": len(result.problems),
        "kept": len(sel.kept),
        "measured": measured,
        "predicted": len(result.scores) - measured,
        "settings": result.settings,
        "bands": [
            {"band": name, "before": sel.before.get(name, 0), "after": sel.after.get(name, 0)}
            for name in sel.before
        ],
        "removed_by_reason": sel.reasons,
        "predictor_agreement": asdict(result.agreement) if result.agreement else None,
        "removed": sel.removed,
    }


def write_outputs(result: FilterResult, out: str | Path, report_dir: str | Path) -> dict:
    """The selected problems as our JSONL at `out`; report.json and the histograms in
    `report_dir`. Returns the report dict."""

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(p.to_json() + "\n" for p in result.selection.kept))
    report = report_dict(result)
    write_report(Path(report_dir), report, result)
    return report

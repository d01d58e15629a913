"""report.json of an evaluation, from the judged samples (pure).

    {"pass_at_k": {"1": x, ...}, "problems": P, "samples_per_problem": N, "max_tokens": M,
     "by_group": [{"platform", "difficulty", "problems", "pass_at_k"}, ...],
     "by_budget": [{"max_tokens", "pass_at_k", "truncation_rate", "verdicts", "by_group"}, ...],
     "verdicts": {...}, "sandbox_faults": n, ...context}
    (--max-turns N: also "max_turns": N, "by_turn": [{"turn", "pass_at_k", ...}, ...])

The headline `pass_at_k` and `by_group` are at the largest budget M. `by_group` has one row per
(platform, difficulty) present, then one `difficulty: "all"` row per platform and one
`platform: "all"` row per difficulty; every row averages the per-problem pass@k of the problems
it covers, so an `all` row is the problem-weighted mean of its cells. `truncation_rate` at B is
the fraction of samples that hit B (finish reason "length"); None when unknown (precomputed
generations). A sandbox fault (SE) counts as a failed sample and is counted in `sandbox_faults`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from microcoder.data.problem import Problem
from microcoder.evaluation.passk import pass_at_k
from microcoder.evaluation.samples import SampleRecord
from microcoder.evaluation.select import difficulty_of, platform_of

ALL = "all"
_DIFFICULTY_ORDER = {"easy": 0, "medium": 1, "hard": 2}


def _difficulty_key(d: str) -> tuple:
    return (_DIFFICULTY_ORDER.get(d, 3), d == "unknown", d)


def _platform_key(p: str) -> tuple:
    return (p == "unknown", p)


def per_problem_counts(
    records: Sequence[SampleRecord], budget: int | None
) -> dict[str, tuple[int, int]]:
    """{problem_id: (samples, passed)} at one budget."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        if r.max_tokens == budget:
            counts[r.problem_id][0] += 1
            counts[r.problem_id][1] += bool(r.passed)
    return {pid: (n, c) for pid, (n, c) in counts.items()}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _groups(problems: Sequence[Problem]) -> list[tuple[str, str, list[str]]]:
    """(platform, difficulty, problem ids) rows: cells, then platform rows, then difficulty rows."""
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    for p in problems:
        cells[(platform_of(p), difficulty_of(p))].append(p.id)
    plats = sorted({pl for pl, _ in cells}, key=_platform_key)
    diffs = sorted({d for _, d in cells}, key=_difficulty_key)
    rows = [(pl, d, cells[(pl, d)]) for pl in plats for d in diffs if (pl, d) in cells]
    rows += [
        (pl, ALL, [i for (q, _), ids in cells.items() if q == pl for i in ids]) for pl in plats
    ]
    rows += [(ALL, d, [i for (_, e), ids in cells.items() if e == d for i in ids]) for d in diffs]
    return rows


def budget_row(
    problems: Sequence[Problem], records: Sequence[SampleRecord], budget: int | None, ks
) -> dict[str, Any]:
    """Figures at one budget: pass@k overall and by group, truncation rate, verdict counts."""
    counts = per_problem_counts(records, budget)
    values = {k: {pid: pass_at_k(n, c, k) for pid, (n, c) in counts.items()} for k in ks}

    def row_pass(ids: Sequence[str]) -> dict[str, float | None]:
        return {str(k): _mean([values[k][i] for i in ids if i in values[k]]) for k in ks}

    at_b = [r for r in records if r.max_tokens == budget]
    known = [r for r in at_b if r.finish_reason is not None]
    return {
        "max_tokens": budget,
        "pass_at_k": row_pass([p.id for p in problems]),
        "truncation_rate": (
            sum(r.finish_reason == "length" for r in known) / len(known) if known else None
        ),
        "samples": len(at_b),
        "verdicts": dict(sorted(Counter(r.verdict for r in at_b).items())),
        "by_group": [
            {"platform": pl, "difficulty": d, "problems": len(ids), "pass_at_k": row_pass(ids)}
            for pl, d, ids in _groups(problems)
        ],
    }


def build_report(
    problems: Sequence[Problem],
    records: Sequence[SampleRecord],
    ks: Sequence[int],
    budgets: Sequence[int | None],
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """report.json (see the module doc). `budgets`: ascending, or [None] for --generations.
    k values above the smallest per-problem sample count are left out (listed in
    `dropped_k`). Records of a `--max-turns` evaluation (their `turn` set): the headline and
    every other figure are the last turn's (the final program), and `by_turn` has one row per
    turn (`turn`, and the figures of `by_budget`'s rows at the budget), turn 1 being the
    single-turn figure."""
    head = budgets[-1]
    turns = sorted({r.turn for r in records if r.turn is not None})
    every_turn = list(records)
    if turns:
        records = [r for r in records if r.turn == turns[-1]]
    counts = per_problem_counts(records, head)
    missing = [p.id for p in problems if p.id not in counts]
    if missing:
        raise ValueError(
            f"{len(missing)} problem(s) have no judged sample (e.g. {missing[0]!r}); "
            "the evaluation did not finish: rerun with --resume"
        )
    n_min = min((n for n, _ in counts.values()), default=0)
    usable = sorted({k for k in ks if k <= n_min})
    rows = [budget_row(problems, records, b, usable) for b in budgets]
    top = rows[-1]
    report: dict[str, Any] = {
        "pass_at_k": top["pass_at_k"],
        "problems": len(problems),
        "samples_per_problem": n_min,
        "max_tokens": head,
        "by_group": top["by_group"],
        "by_budget": rows,
        "verdicts": top["verdicts"],
        "sandbox_faults": sum(r.verdict == "SE" for r in records if r.max_tokens == head),
        "k": usable,
        "dropped_k": sorted({k for k in ks if k > n_min}),
    }
    if turns:
        report["max_turns"] = turns[-1]
        report["by_turn"] = [
            {
                "turn": k,
                **budget_row(problems, [r for r in every_turn if r.turn == k], head, usable),
            }
            for k in turns
        ]
    report.update(context or {})
    return report

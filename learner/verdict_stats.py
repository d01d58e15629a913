"""Every verdict visible: the step's verdict counts, extraction failures, response-length
percentiles and group pass-rate histogram, from the responses of the groups trained on.

Rank 0 computes them once per step while it fetches (actors/learner_rank.py: `fetch_batch`,
through actors/convert.py: `verdict_inputs`); they go into the step record under these keys
(metrics.jsonl, Prometheus with a `verdict` / `bin` label, TensorBoard and W&B flattened,
the dashboard):

    verdict_counts     {label: count} for every label of VERDICT_LABELS (zeros included)
    verdict_rates      the same divided by the responses counted (all 0 when none)
    extraction_failed  responses with nothing judged: `no_code` + `unfinished`
    response_len_p50, response_len_p90, response_len_max   response tokens
    group_pass_hist    [count of groups per bin of GROUP_PASS_BINS]
    reward_components  {name: mean} of the reward function's named components
                       (`executor.reward`), each over the responses that report it; absent
                       when none does
    data               {source: {share, groups, reward, pass_rate}} per data source
                       (`data.sources`), over every group fetched for the step (filtered ones
                       too, as `reward_mean`): `source_metrics`
    turns_mean, feedback_tokens_mean, turn_pass
                       multi-turn runs only (`environment.kind` not "single"): turns per
                       trajectory, feedback tokens per trajectory, and {turn: pass rate} at each
                       turn (`trajectory_metrics`); absent on single-turn runs

A response's label is its verdict, except that a response the extractor found no code in
(sandbox/extract.py: status `no_code`, which the judge scores WA) is counted as `no_code`, not
WA. learner/ does not import buffer/: the inputs are plain lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from microcoder.sandbox.verdict import UNFINISHED, VERDICTS

NO_CODE = "no_code"
"""The label of a response with nothing to run (judged WA, counted apart from WA)."""
VERDICT_LABELS = (*VERDICTS, NO_CODE)
"""The keys of `verdict_counts` / `verdict_rates`, always all present (0 when unseen)."""
EXTRACTION_FAILURES = (NO_CODE, UNFINISHED)
"""The labels counted in `extraction_failed`: the two outcomes where extraction gave no program."""
GROUP_PASS_BINS = ("0%", "(0%,25%]", "(25%,50%]", "(50%,75%]", "(75%,100%)", "100%")
"""The bins of `group_pass_hist` (their labels: Prometheus `bin`, TensorBoard tags; no dots, as
dots nest tags), by a group's pass rate (the fraction of its responses whose verdict is AC):
exactly 0; (0, 0.25]; (0.25, 0.5]; (0.5, 0.75]; (0.75, 1) open at 1; exactly 1. The first and
last hold the groups with no signal (every response failed, or every one passed)."""
_UPPER = (0.25, 0.5, 0.75)  # closed upper edges of the middle bins before (0.75, 1)


def verdict_counts(labels: Iterable[str]) -> dict[str, int]:
    """{label: count} over VERDICT_LABELS (zeros included), plus any unknown label seen."""
    counts = dict.fromkeys(VERDICT_LABELS, 0)
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return counts


def pass_bin(rate: float) -> int:
    """The index in GROUP_PASS_BINS of a group pass rate in [0, 1]."""
    if rate <= 0.0:
        return 0
    if rate >= 1.0:
        return len(GROUP_PASS_BINS) - 1
    for i, upper in enumerate(_UPPER):
        if rate <= upper:
            return i + 1
    return len(GROUP_PASS_BINS) - 2


def group_pass_hist(pass_rates: Iterable[float]) -> list[int]:
    """Counts of groups per bin of GROUP_PASS_BINS."""
    hist = [0] * len(GROUP_PASS_BINS)
    for rate in pass_rates:
        hist[pass_bin(rate)] += 1
    return hist


def length_stats(lengths: Sequence[int]) -> dict[str, float]:
    """response_len_p50 / _p90 / _max of response token counts ({} when there are none);
    percentiles by linear interpolation (numpy's default)."""
    if not len(lengths):
        return {}
    a = np.asarray(lengths, dtype=np.float64)
    return {
        "response_len_p50": float(np.percentile(a, 50)),
        "response_len_p90": float(np.percentile(a, 90)),
        "response_len_max": float(a.max()),
    }


def step_verdict_metrics(groups: Sequence[tuple[Sequence[str], Sequence[int]]]) -> dict:
    """The module's step metrics over `groups`: (labels, response token counts) per group, one
    entry per response."""
    labels = [label for ls, _ in groups for label in ls]
    counts = verdict_counts(labels)
    total = len(labels)
    rates = {k: (v / total if total else 0.0) for k, v in counts.items()}
    return {
        "verdict_counts": counts,
        "verdict_rates": rates,
        "extraction_failed": sum(counts[k] for k in EXTRACTION_FAILURES),
        **length_stats([n for _, ns in groups for n in ns]),
        "group_pass_hist": group_pass_hist(
            sum(label == "AC" for label in ls) / len(ls) for ls, _ in groups if len(ls)
        ),
    }


def reward_component_means(components: Iterable[Mapping[str, float]]) -> dict:
    """{"reward_components": {name: mean}} over the responses' component maps, each name over
    the responses that report it; {} when none reports any."""
    sums: dict[str, list[float]] = {}
    for c in components:
        for name, v in c.items():
            acc = sums.setdefault(name, [0.0, 0])
            acc[0] += float(v)
            acc[1] += 1
    if not sums:
        return {}
    return {"reward_components": {k: total / n for k, (total, n) in sorted(sums.items())}}


UNNAMED_SOURCE = "unnamed"
"""The `data` key of groups whose prompt came from a source without a name (a bare prompt list,
or a producer that did not say)."""


def source_metrics(groups: Sequence[tuple[str, Sequence[float], Sequence[str]]]) -> dict:
    """{"data": {source: {"share", "groups", "reward", "pass_rate"}}} over `groups`, (source
    name, rewards, verdict labels) per group, one entry per response: each source's share of the
    groups, its group count, mean reward over its responses and pass rate (the fraction of its
    responses whose verdict is AC, as `group_pass_hist`). Every source of the step appears,
    the one source of a one-source run too; {} when there are no groups."""
    if not groups:
        return {}
    acc: dict[str, list[float]] = {}  # name: [groups, responses, reward sum, passes]
    for source, rewards, labels in groups:
        a = acc.setdefault(source or UNNAMED_SOURCE, [0, 0, 0.0, 0])
        a[0] += 1
        a[1] += len(rewards)
        a[2] += float(sum(rewards))
        a[3] += sum(label == "AC" for label in labels)
    total = len(groups)
    return {
        "data": {
            name: {
                "share": n / total,
                "groups": n,
                "reward": reward / responses if responses else 0.0,
                "pass_rate": passes / responses if responses else 0.0,
            }
            for name, (n, responses, reward, passes) in sorted(acc.items())
        }
    }


def trajectory_metrics(trajectories: Sequence[tuple[Sequence[bool | None], int]]) -> dict:
    """The multi-turn metrics over the trajectories trained on, each given as (its turns'
    `Turn.passed`, in order; its feedback tokens in all); {} when there are none (a single-turn
    run sends none, so its step records are unchanged):

        turns_mean            model turns per trajectory
        feedback_tokens_mean  feedback tokens (the environment's messages between turns, chat
                              template included) per trajectory
        turn_pass             {"k": pass rate at turn k}: of the trajectories that reached turn
                              k and whose environment checked it (passed not None), the
                              fraction that passed (`repair`: the visible tests); a turn no
                              environment checked has no entry

    A trajectory with no turns recorded counts as one unchecked turn."""
    if not trajectories:
        return {}
    turns = [list(passed) or [None] for passed, _ in trajectories]
    checked: dict[int, list[int]] = {}  # turn -> [checked, passed]
    for passed in turns:
        for k, p in enumerate(passed, 1):
            if p is not None:
                acc = checked.setdefault(k, [0, 0])
                acc[0] += 1
                acc[1] += bool(p)
    n = len(trajectories)
    return {
        "turns_mean": sum(len(t) for t in turns) / n,
        "feedback_tokens_mean": sum(tokens for _, tokens in trajectories) / n,
        "turn_pass": {str(k): p / c for k, (c, p) in sorted(checked.items())},
    }

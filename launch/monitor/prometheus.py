"""The Prometheus `/metrics` page: the newest step's values in the text exposition format 0.0.4.

    microcoder_reward_mean 0.42                               gauges: every numeric step field
    microcoder_buffer_depth{stage="scored"} 3                 queue depths by stage
    microcoder_buffer_groups_total{outcome="consumed"} 120    the accounting counters
    microcoder_buffer_consumed_by_staleness_total{staleness="1"} 40
    microcoder_eval_heldout_pass_rate 0.3                     the newest "eval" record
    microcoder_mismatch_by_staleness_kl{staleness="1"} 2e-4  the learner's mismatch by staleness
    microcoder_verdict_counts{verdict="AC"} 12                the step's verdicts (and _rates)
    microcoder_group_pass_hist{bin="(0%,25%]"} 3              groups by pass rate
    microcoder_reward_components{component="formatted"} 0.5  the reward function's components
    microcoder_reward_errors_total 2                          groups its errors failed (run total)
    microcoder_turn_pass{turn="2"} 0.4                        multi-turn runs: pass rate at
                                                              each turn (microcoder_turns_mean,
                                                              _feedback_tokens_mean: gauges)
    microcoder_data_share{source="A"} 0.8                     per data source: share of the
                                                              step's groups (and _groups,
                                                              _reward, _pass_rate)
    microcoder_actor_rss_bytes{pool="generator",actor="generator-0"} 2.1e9
                                                              memory per actor (MEMORY_METRICS:
                                                              also _device_allocated_bytes, ...,
                                                              microcoder_engine_kv_cache_usage)

Scrape it with `- targets: ['HOST:PORT']` (the dashboard's address): launch/monitor/dashboard_server.py
serves it, rendered on each request from the dashboard's store; unlike the TensorBoard and W&B
sinks of launch/monitor/metrics_export.py, nothing is pushed.
"""

from __future__ import annotations

import re
from typing import Any

from microcoder.launch.monitor.dashboard_store import flatten, staleness_hist

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "microcoder_"
OUTCOMES = ("issued", "consumed", "dropped_stale", "failed")
"""Buffer counters exported as microcoder_buffer_groups_total{outcome=...}."""
BUFFER_COUNTERS = ("response_tokens_in", "bytes_in", "bytes_out", "requests", "retired", "deferred")
"""Other monotonic buffer totals (exported with a _total suffix); `retired` (problems) and
`deferred` (skipped hand-outs) are online difficulty's (buffer/difficulty.py)."""
BUFFER_HANDLED = ("depths", "staleness_hist", "failed_by_reason", "errors", "entered", "left")


def metric_name(key: str) -> str:
    """A valid Prometheus metric name for a dotted record key."""
    name = re.sub(r"[^a-zA-Z0-9_:]", "_", key)
    return PREFIX + (name if not name[:1].isdigit() else "_" + name)


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


class _Page:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen: set[str] = set()

    def metric(self, name: str, kind: str, help_text: str, samples: list[tuple[dict, float]]):
        if name in self.seen or not samples:
            return
        self.seen.add(name)
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for labels, value in samples:
            lab = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            self.lines.append(f"{name}{{{lab}}} {_num(value)}" if lab else f"{name} {_num(value)}")


def _buffer_metrics(page: _Page, buf: dict[str, Any]) -> None:
    depths = buf.get("depths") or {}
    page.metric(
        PREFIX + "buffer_depth",
        "gauge",
        "Groups in each buffer stage.",
        [({"stage": k}, v) for k, v in sorted(depths.items())],
    )
    page.metric(
        PREFIX + "buffer_groups_total",
        "counter",
        "Group slots by outcome since the run began.",
        [({"outcome": k}, buf[k]) for k in OUTCOMES if isinstance(buf.get(k), (int, float))],
    )
    page.metric(
        PREFIX + "buffer_failed_by_reason_total",
        "counter",
        "Failed group slots by reason.",
        [({"reason": k}, v) for k, v in sorted((buf.get("failed_by_reason") or {}).items())],
    )
    page.metric(
        PREFIX + "buffer_errors_total",
        "counter",
        "Bad requests to the buffer by code.",
        [({"code": k}, v) for k, v in sorted((buf.get("errors") or {}).items())],
    )
    page.metric(
        PREFIX + "buffer_consumed_by_staleness_total",
        "counter",
        "Groups the learner consumed, by staleness (versions behind).",
        [({"staleness": k}, v) for k, v in staleness_hist({"buffer": buf}).items()],
    )
    for key in BUFFER_COUNTERS:
        if isinstance(buf.get(key), (int, float)):
            page.metric(
                metric_name(f"buffer_{key}") + "_total",
                "counter",
                f"Buffer total {key}.",
                [({}, buf[key])],
            )
    rest = {k: v for k, v in buf.items() if k not in BUFFER_HANDLED + OUTCOMES + BUFFER_COUNTERS}
    for key, value in flatten(rest, "buffer.").items():
        page.metric(metric_name(key), "gauge", f"Buffer {key[7:]}.", [({}, value)])


def _mismatch_metrics(page: _Page, by: dict[str, dict[str, float]]) -> None:
    """The learner's mismatch metrics per staleness bucket (learner/algorithm/mismatch.py), one gauge per
    metric labelled by staleness ("0", "1", ..., the last one "8+")."""
    names = sorted({n for values in by.values() for n in values})
    for n in names:
        page.metric(
            metric_name(f"mismatch_by_staleness_{n}"),
            "gauge",
            f"Newest learner step: mismatch {n} over the tokens of responses that many versions "
            "behind.",
            [({"staleness": k}, v[n]) for k, v in by.items() if n in v],
        )


VERDICT_KEYS = ("verdict_counts", "verdict_rates")
"""Step fields of {verdict: value}, exported as one gauge each with a `verdict` label."""
REWARD_KEYS = ("reward_components", "reward_errors")
"""Step fields of the reward function (`executor.reward`), exported by `_reward_metrics`."""


def _verdict_metrics(page: _Page, step: dict[str, Any]) -> None:
    """The step's verdict counts and rates by `verdict`, and its group pass-rate histogram by
    `bin` (learner/verdict_stats.py: GROUP_PASS_BINS)."""
    from microcoder.learner.verdict_stats import GROUP_PASS_BINS

    for key in VERDICT_KEYS:
        page.metric(
            metric_name(key),
            "gauge",
            f"Newest learner step: {key.replace('_', ' ')} of the responses trained on, by verdict.",
            [({"verdict": k}, v) for k, v in (step.get(key) or {}).items()],
        )
    hist = step.get("group_pass_hist") or []
    page.metric(
        metric_name("group_pass_hist"),
        "gauge",
        "Newest learner step: groups trained on, by pass rate (fraction AC).",
        [({"bin": b}, v) for b, v in zip(GROUP_PASS_BINS, hist, strict=False)],
    )


def _turn_metrics(page: _Page, step: dict[str, Any]) -> None:
    """A multi-turn run's pass rate at each turn ({turn: rate}, learner/verdict_stats.py
    `trajectory_metrics`) as one gauge labelled by `turn`."""
    by = step.get("turn_pass")
    if not isinstance(by, dict):
        return
    page.metric(
        metric_name("turn_pass"),
        "gauge",
        "Newest learner step: of the trajectories that reached each turn (and whose "
        "environment checked it), the fraction that passed, by turn.",
        [
            ({"turn": k}, v)
            for k, v in sorted(by.items(), key=lambda kv: int(kv[0]))
            if isinstance(v, (int, float))
        ],
    )


def _reward_metrics(page: _Page, step: dict[str, Any]) -> None:
    """The reward function's named components ({name: mean}, learner/verdict_stats.py) as one
    gauge labelled by `component`, and the groups its errors failed (the executors' cumulative
    `reward_errors`) as a counter."""
    page.metric(
        metric_name("reward_components"),
        "gauge",
        "Newest learner step: mean of each named component of the reward function over the "
        "responses that report it.",
        [({"component": k}, v) for k, v in sorted((step.get("reward_components") or {}).items())],
    )
    if isinstance(step.get("reward_errors"), (int, float)):
        page.metric(
            metric_name("reward_errors") + "_total",
            "counter",
            "Groups failed because the reward function raised or returned no number, since the "
            "run began.",
            [({}, step["reward_errors"])],
        )


SOURCE_FIELDS = {
    "share": "share of the step's groups drawn from the source",
    "groups": "groups of the step drawn from the source",
    "reward": "mean reward over the responses of the source's groups",
    "pass_rate": "fraction of the responses of the source's groups judged AC",
}
"""The per-source fields of a step's `data` map (learner/verdict_stats.py `source_metrics`),
each exported as microcoder_data_<field>{source=...}."""


def _source_metrics(page: _Page, step: dict[str, Any]) -> None:
    """The step's per-data-source metrics, one gauge per field labelled by `source`."""
    by = step.get("data")
    if not isinstance(by, dict):
        return
    for field, text in SOURCE_FIELDS.items():
        page.metric(
            metric_name(f"data_{field}"),
            "gauge",
            f"Newest learner step: {text}, by data source.",
            [
                ({"source": name}, v[field])
                for name, v in sorted(by.items())
                if isinstance(v, dict) and isinstance(v.get(field), (int, float))
            ],
        )


MEMORY_METRICS = {
    "rss_bytes": ("actor_rss_bytes", "resident memory of the actor's process and its children"),
    "processes": ("actor_processes", "processes counted in actor_rss_bytes"),
    "peak_rss_bytes": ("actor_peak_rss_bytes", "highest resident memory of the actor's process"),
    "device_allocated_bytes": ("actor_device_allocated_bytes", "CUDA memory held by live tensors"),
    "device_reserved_bytes": ("actor_device_reserved_bytes", "CUDA memory torch's allocator holds"),
    "device_peak_bytes": ("actor_device_peak_bytes", "highest CUDA memory held by live tensors"),
    "device_total_bytes": ("actor_device_total_bytes", "memory of the actor's GPU(s)"),
    "kv_cache_usage": ("engine_kv_cache_usage", "fraction of the vLLM engine's KV cache in use"),
    "kv_cache_peak": ("engine_kv_cache_peak", "highest engine_kv_cache_usage of the last 30 s"),
}
"""Each `ActorMemory` figure (microcoder/protocol.py) -> (metric name after microcoder_, help)."""


def _memory_metrics(page: _Page, memory: dict[str, Any]) -> None:
    """Every actor's memory in the step record (launch/monitor/memory_view.py), one gauge per
    figure labelled by `pool` and `actor`; a figure an actor lacks has no sample."""
    for figure, (name, text) in MEMORY_METRICS.items():
        samples = [
            ({"pool": pool, "actor": actor}, figures[figure])
            for pool, actors in memory.items()
            if isinstance(actors, dict)
            for actor, figures in actors.items()
            if isinstance(figures, dict) and isinstance(figures.get(figure), (int, float))
        ]
        page.metric(PREFIX + name, "gauge", f"Newest learner step: {text}.", samples)


def prometheus_text(latest_step: dict[str, Any], latest_eval: dict[str, Any] | None = None) -> str:
    """The exposition page for the newest step (and eval) record; `microcoder_up 1` always."""
    page = _Page()
    page.metric(PREFIX + "up", "gauge", "1 while the launcher serves metrics.", [({}, 1)])
    if latest_step.get("time") is not None:
        page.metric(
            PREFIX + "last_step_timestamp_seconds",
            "gauge",
            "Unix time of the newest learner step.",
            [({}, latest_step["time"])],
        )
    _buffer_metrics(page, latest_step.get("buffer") or {})
    _mismatch_metrics(page, latest_step.get("mismatch_by_staleness") or {})
    _verdict_metrics(page, latest_step)
    _reward_metrics(page, latest_step)
    _source_metrics(page, latest_step)
    _turn_metrics(page, latest_step)
    _memory_metrics(page, latest_step.get("memory") or {})
    skip = ("buffer", "time", "mismatch_by_staleness", "data", "memory", "turn_pass")
    skip += VERDICT_KEYS
    skip += REWARD_KEYS
    step = {k: v for k, v in latest_step.items() if k not in skip}
    for key, value in flatten(step).items():
        page.metric(metric_name(key), "gauge", f"Newest learner step: {key}.", [({}, value)])
    ev = {k: v for k, v in (latest_eval or {}).items() if k != "time"}
    for key, value in flatten(ev, "eval.").items():
        page.metric(metric_name(key), "gauge", f"Newest evaluation: {key[5:]}.", [({}, value)])
    return "\n".join(page.lines) + "\n"

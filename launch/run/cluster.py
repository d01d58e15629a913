"""The cluster handle of a run (`Run`): Ray, the actors it owns, checkpoints and shutdown.

Bring-up: Ray -> model folder -> the problems (the run's problem store, RUN_DIR/problems.sqlite,
built and measured by launch/run/problems.py) -> buffer host
-> learner group (publishes version 0) -> executors -> generators (each pulls the learner's
weights; the first calibrates the temperature before its loop) -> with eval.generators > 0, the
generators set aside for the eval (no loop; launch/run/eval_beside.py). `Run` holds the handles (buffer, learner group, pools, buffer clients) and the metrics
logger, and owns the life and death of the actors; it drives nothing. The training loop is
launch/run/training_loop.py, the thread keeping the pools alive launch/run/supervisor.py, the `launch`
command launch/run/command.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from pathlib import Path

from microcoder.actors.deadline import get_within
from microcoder.actors.remote import buffer_host_cls, executor_cls, generator_cls
from microcoder.buffer.keys import ensure_keys, keys_dir_of
from microcoder.launch.config import Config
from microcoder.launch.monitor.metrics_log import MetricsLogger
from microcoder.launch.run.actor_settings import (
    eval_generator_settings,
    generator_settings,
    replica_index,
)
from microcoder.launch.run.buffer_watch import BufferWatch
from microcoder.launch.run.checkpoint_retention import AsyncCheckpoints
from microcoder.launch.run.learner_group import LearnerGroup
from microcoder.launch.run.placement import (
    cluster_custom,
    cluster_totals,
    make_plan,
    release_all,
    replica_options,
)
from microcoder.launch.run.pools import Pool
from microcoder.launch.run.temperature_control import build_controller


class BufferDied(RuntimeError):
    """The run's buffer actor died or stopped answering (launch/run/buffer_watch.py: BufferWatch):
    the run cannot go on and writes no checkpoint; resume from the newest complete one."""


class ReplicaFailed(RuntimeError):
    """A generator or executor kept failing after its restarts (launch/run/pools.py `RestartBudget`):
    the run cannot go on as configured; the message names the last error and the fix."""


LOOPBACK = "127.0.0.1"
"""The one address of a local run: Ray's node IP, the buffer and the weight channels."""


RAY_START_TRIES = 3
"""Local Ray starts tried before a launch gives up: Ray waits a fixed 30 s for its raylet to
register, which a loaded laptop (other launches booting at once) can miss; a later try usually
makes it (the failed instance's processes are left to Ray's reaper, which ends them with this
process)."""
RAY_START_TIMEOUT = "timed out during startup"
"""Ray's words when its raylet missed that deadline (ray/_private/node.py)."""


def init_local_ray(log=print, **kwargs) -> None:
    """Start a new Ray instance on this machine, every address of it on loopback (up to
    RAY_START_TRIES times when Ray's raylet misses its start deadline, each retry logged).

    `address="local"`: never attach to another instance. Without it, `ray.init` joins
    $RAY_ADDRESS or the newest cluster `ray start` recorded (/tmp/ray/ray_current_cluster, see
    ray._private.services.get_ray_address_from_environment), and fails when that one is dead.

    Loopback: Ray 2.60 replaces a `_node_ip_address` of 127.0.0.1 by the machine's interface
    address (services.resolve_ip_for_localhost); only with ray_constants.ENABLE_RAY_CLUSTER off,
    its single-machine mode, does the new node take 127.0.0.1 (services.get_node_ip_address).
    The flag is read only while the node starts; its raylet, GCS and workers then get 127.0.0.1
    as their node IP and bind it, and `ray.util.get_node_ip_address()` returns it in actors."""
    import ray
    import ray._private.ray_constants as ray_constants

    if "address" in kwargs or "_node_ip_address" in kwargs:
        raise ValueError("init_local_ray starts its own local instance: pass no address")
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        for attempt in range(1, RAY_START_TRIES + 1):
            try:
                ray.init(address="local", **kwargs)
                return
            except Exception as err:
                if RAY_START_TIMEOUT not in str(err) or attempt == RAY_START_TRIES:
                    raise
                log(
                    f"Ray's local node did not register in its fixed 30 s (try {attempt} of "
                    f"{RAY_START_TRIES}; is the machine loaded?); starting it again"
                )
                ray.shutdown()
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def plan_on_cluster(cfg: Config, address: str, log=print):
    """The placement plan on the cluster a run joined: its resources as Ray counts them
    (`ray.cluster_resources()`: CPUs, GPUs, custom resources), not the driver's; a plan that
    does not fit stops the run. `cluster.device = "auto"` is resolved here, from the cluster's
    GPUs (the driver may have none), and written into `cfg` before any actor is made."""
    import ray

    resources = ray.cluster_resources()
    cpus, gpus = cluster_totals(resources)
    if cfg.cluster.device == "auto":
        cfg.cluster.device = "cuda" if gpus else "cpu"
    plan = make_plan(cfg, cfg.cluster.device, cpus, gpus, cluster_custom(resources))
    log(f"joined the Ray cluster at {address}\n{plan.format()}")
    if plan.errors:
        ray.shutdown()
        raise RuntimeError(
            f"the placement plan does not fit the cluster at {address}: " + "; ".join(plan.errors)
        )
    return plan


class Run:
    def __init__(
        self, cfg: Config, run_dir: Path, address: str = "local", resume_from: Path | None = None
    ):
        self.cfg = cfg
        self.run_dir = run_dir
        self.address = address
        self.resume_from = resume_from
        self.metrics = MetricsLogger(run_dir)
        self.log_path = run_dir / "launcher.log"
        self.buffer = self.learners = self.generators = self.executors = None
        self.eval_generators = None
        """eval.generators > 0: the generators set aside for the eval beside training (no loop;
        launch/run/eval_beside.py holds only them), else None."""
        self.eval_activity: dict = {}
        """What the held-out eval beside training is doing, for `microcoder status` and the
        dashboard (launch/run/eval_beside.py sets it): {"state": "evaluating" | "idle", "step",
        "version" (the policy version it samples at), "replicas" (the generators it holds),
        "since" (unix s)}; {} before the first eval point."""
        self.buffer_address = ""
        self.weight_channel_address = ""
        """The address learner rank 0's weight channels bind (its node's IP, as Ray reports it)."""
        self.client = None
        self.release_client = None
        """The supervisor thread's own BufferClient (`start_pools`): it returns dead replicas'
        leases and pings the buffer; a ZeroMQ socket is not shared between threads."""
        self.controller = None
        self.saves = AsyncCheckpoints(self)  # the one checkpoint in flight
        self.start_time = time.time()
        self.problems = None
        """The run's RunProblems (launch/run/problems.py): the problem store's path and prompt
        measurement, and the held-out set."""
        self.reasoning = "none"
        """prompt.reasoning resolved for the model's tokenizer (launch/run/problems.py)."""
        self.fatal = ""
        """Why the run cannot go on (the supervisor sets it: the buffer died); "" while it can."""
        self.fatal_error: type[Exception] = BufferDied
        """What `raise_if_stopped` raises once `fatal` is set."""

    def log(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        with self.log_path.open("a") as f:
            f.write(line + "\n")

    def stop_for(self, why: str) -> None:
        """The run cannot go on (`why`: the buffer died): say so once; the training loop raises
        BufferDied at its next look (`raise_if_stopped`, at least once a second while it waits),
        no checkpoint is written from here on, and `shutdown` kills the actors without asking
        them to return leases to a buffer that is gone."""
        if self.fatal:
            return
        self.fatal = why
        self.log(f"{why}: stopping the run (a checkpoint needs the buffer's snapshot)")
        self.metrics.log("event", event="buffer_died", message=why)
        self._kill_learners()  # whatever the main thread waits on them for ends now

    def stop_for_replica(self, why: str) -> None:
        """A replica was given up on after too many restarts (`why`, from launch/run/pools.py): say
        so once; the training loop raises ReplicaFailed at its next look. The learner and the
        buffer are alive, so the run's exit path can still checkpoint."""
        if self.fatal:
            return
        self.fatal = why
        self.fatal_error = ReplicaFailed
        self.log(f"stopping the run: {why}")
        self.metrics.log("event", event="replica_failed", message=why)

    def _kill_learners(self) -> None:
        """Without the buffer nothing since the last checkpoint can be saved, and a rank may wait
        on the dead buffer (publish's version announce): killing them ends every wait at once."""
        import ray

        for rank in self.learners.ranks if self.learners is not None else []:
            try:
                ray.kill(rank, no_restart=True)
            except Exception as err:
                self.log(f"killing a learner rank: {err}")

    def raise_if_stopped(self) -> None:
        if self.fatal:
            raise getattr(self, "fatal_error", BufferDied)(self.fatal)  # set in __init__

    def buffer_gone(self) -> str:
        """Why the buffer is dead, asked now (the supervisor's look, once: for an error the
        main thread saw before the supervisor's next round); "" while it answers."""
        if self.fatal or self.buffer is None:
            return self.fatal

        why = BufferWatch.for_run(self).check()
        if why:
            self.stop_for(why)
        return why

    # ------------------------------------------------------------ bring-up

    def start_ray(self, plan_cpus: float, check_plan: bool = True) -> None:
        """A local run: a new Ray instance (init_local_ray, its retries said through `self.log`).
        With an address: join that cluster
        and, unless `check_plan` is off, check the placement plan on its resources."""
        import ray

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        env = {"env_vars": {"MICROCODER_ACTOR_LOG_DIR": str(self.run_dir / "logs")}}
        if self.address == "local":
            cores = self.cfg.cluster.local_cpus()
            # Logical CPUs: the plan's reservations plus headroom so `microcoder scale` can add
            # replicas on a laptop (they time-share the cores; Ray counts are not a hardware limit).
            init_local_ray(
                self.log,
                num_cpus=max(cores, int(plan_cpus + 0.999)) + 8,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env=env,
            )
        else:
            ray.init(address=self.address, log_to_driver=False, runtime_env=env)
            if check_plan:
                plan_on_cluster(self.cfg, self.address, self.log)

    def bring_up(self, model_path: str) -> None:
        """Start the run's actors in order: the problems (launch/run/problems.py: `load_for_run`),
        the buffer, the learner group, then the executor and generator pools (each step needs the
        one before it)."""
        from microcoder.launch.run.problems import load_for_run

        self.problems, self.reasoning = load_for_run(self.cfg, model_path, self.run_dir, self.log)
        self.start_buffer()
        self.start_learners(model_path)
        self.start_pools(model_path)
        self.log("all pools running")

    def start_buffer(self) -> None:
        """The buffer actor on the driver's node (restoring the checkpoint's snapshot on a
        resume), its address once it has bound its socket, and the launcher's client."""
        from microcoder.buffer.client import BufferClient

        cfg = self.cfg
        ckpt = self.resume_from
        snapshot = (
            str(ckpt / "buffer.snapshot") if ckpt and (ckpt / "buffer.snapshot").exists() else None
        )
        keys_dir = self.buffer_keys()
        self.log("starting the buffer" + (f" (restoring {snapshot})" if snapshot else ""))
        self.buffer = (
            buffer_host_cls()
            .options(name="mc-buffer", scheduling_strategy=self.driver_node())
            .remote(
                cfg.buffer,
                cfg.data,
                cfg.learner.batch_size,
                self.problems.table_spec(),  # the host opens the store: no prompt crosses Ray
                restore_from=snapshot,
                keys_dir=keys_dir,
                snapshot_root=str(self.run_dir.resolve()),
                seed=cfg.seed,
            )
        )
        self.buffer_address = get_within(  # the buffer is up once it has bound its socket
            self.buffer.get_address.remote(),
            cfg.cluster.ready_timeout_s,
            "starting",
            "the buffer actor mc-buffer (log RUN_DIR/logs/buffer.log)",
            "raise cluster.ready_timeout_s if it is only slow (restoring a big snapshot)",
        )
        self.client = BufferClient.from_config(cfg.buffer, self.buffer_address, owner="launcher")

    def start_learners(self, model_path: str) -> None:
        """The learner group (from the checkpoint on a resume) and rank 0's weight channels."""

        cfg = self.cfg
        ckpt = self.resume_from
        self.log(
            f"buffer at {self.buffer_address}; starting {cfg.learner.world_size} learner rank(s)"
        )
        self.learners = LearnerGroup(
            cfg, model_path, self.buffer_address, str(ckpt) if ckpt else None
        )
        self.weight_channel_address = get_within(
            self.learners.rank0.weight_channel_host.remote(),
            cfg.learner.sync_timeout_s,
            "weight_channel_host",
            self.learners.names[0],
            "raise learner.sync_timeout_s if it is only slow",
        )
        self.log(
            f"learner ready at policy version {self.learners.version}; weight channels at "
            f"{self.weight_channel_address}"
        )

    def start_pools(self, model_path: str) -> None:
        """The executor and generator pools, supervised: a dead replica's leases go back to the
        buffer and the replica is restarted."""
        from microcoder.buffer.client import BufferClient

        cfg = self.cfg
        # The supervisor thread returns dead replicas' leases through its own client: a ZeroMQ
        # socket must not be used by two threads at once (the loop uses self.client).
        self.release_client = BufferClient.from_config(
            cfg.buffer, self.buffer_address, owner="supervisor"
        )

        def release(owner: str) -> str:  # the owner's process died
            r = self.release_client.release(owner, died=True)
            return f"{r.prompts} prompts, {r.groups} groups"

        def pool(kind: str, cls, cpus: float, gpus: float, resources, make, loop=True) -> Pool:
            """A supervised pool of restartable `cls` replicas named mc-<name>; `make(actor,
            name)` passes a replica its constructor arguments; `loop` False: no `run()` loop."""

            def start(n: str):
                opts = replica_options(cpus, gpus, cfg.cluster.device, n, resources=resources)
                return make(cls.options(name=f"mc-{n}", max_restarts=-1, **opts), n)

            return Pool(kind, start, release, self.log, cfg.cluster.ready_timeout_s, runs_loop=loop)

        ex = cfg.executor
        gen = cfg.generator
        self.executors = pool(
            "executor",
            executor_cls(ex),
            ex.cpus_per_executor,
            0.0,
            ex.resources,
            lambda actor, n: actor.remote(
                n,
                ex,
                cfg.buffer,
                self.buffer_address,
                str(self.problems.store_path.resolve()),  # opened by path, read by id
                reasoning=self.reasoning,
            ),
        )
        self.generators = pool(
            "generator",
            generator_cls(gen),
            gen.cpus_per_engine,
            gen.gpus_per_engine,
            gen.resources,
            lambda actor, n: actor.remote(
                n,
                # its own engine seed; the problem store for a multi-turn environment's reset
                generator_settings(
                    cfg,
                    replica_index(n),
                    str(self.problems.store_path.resolve()),
                    self.reasoning,
                ),
                model_path,
                self.buffer_address,
                self.learners.rank0_name,  # looked up by name: no handle in the object store
            ),
        )
        self.log(f"starting {ex.num_executors} executor(s)")
        self.executors.add(ex.num_executors)
        self.log(f"starting {gen.num_engines} generator(s) (vLLM engine start takes a while)")
        self.generators.add(gen.num_engines, before_loop=self.prepare_generator)
        n_eval = cfg.eval.generators
        if n_eval:
            self.eval_generators = pool(
                "eval-generator",
                generator_cls(gen),
                gen.cpus_per_engine,
                gen.gpus_per_engine,
                gen.resources,
                lambda actor, n: actor.remote(
                    n,
                    eval_generator_settings(cfg, replica_index(n)),
                    model_path,
                    None,  # no buffer: no training loop, only sample_eval
                    self.learners.rank0_name,
                ),
                loop=False,
            )
            self.log(f"starting {n_eval} generator(s) set aside for the eval (eval.generators)")
            self.eval_generators.add(n_eval)

    def driver_node(self):
        """The buffer runs on the driver's node (the head of a joined cluster): without a
        strategy Ray may put a 0-CPU actor on any node."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)

    def buffer_keys(self) -> str | None:
        """The run's CurveZMQ keys folder (buffer.keys_dir, else RUN_DIR/keys), made unless
        present (a resumed run reuses its keys); None with buffer.curve = false."""
        if not self.cfg.buffer.curve:
            self.log("buffer.curve = false: any process that reaches the buffer port can use it")
            return None

        keys, made = ensure_keys(self.cfg.buffer.keys_dir or keys_dir_of(self.run_dir))
        self.log(f"buffer keys: {'made' if made else 'reusing'} {keys} (only the run's actors)")
        return str(keys.resolve())

    def prepare_generator(self, handle) -> None:
        """Before a generator's loop starts: give it the controller's temperature (the first
        one builds the controller, calibrating on this generator, so step 1 samples at it)."""

        self.controller = self.controller or build_controller(self, handle)
        get_within(
            handle.set_temperature.remote(self.controller.temperature),
            self.cfg.cluster.ready_timeout_s,
            "set_temperature",
            "a generator about to start its loop",
            "its log is in RUN_DIR/logs; raise cluster.ready_timeout_s if it is only slow",
        )

    # ------------------------------------------------------------ checkpoints

    def checkpoint(self, pending: Collection[int] = ()) -> Path:
        """Start a checkpoint of the learner's version (launch/run/checkpoint_retention.py): the
        buffer's snapshot, the learner ranks' host snapshot, controller state; written in the
        background to step_N.partial, renamed and marked COMPLETE when `saves.poll` or
        `saves.wait` finds it done. Named by the learner's own version: after Ctrl-C mid-step
        the learner may be one step ahead. The buffer's snapshot comes first, so a buffer that
        is dead or does not answer leaves nothing written, and a version already checkpointed
        COMPLETE is not written again (the learner has not changed since; rewriting could only
        break a good checkpoint). `pending`: steps whose held-out eval is still running (kept by
        learner.keep_best until their score lands, launch/run/checkpoint_retention.py)."""

        self.raise_if_stopped()
        step = get_within(  # waits for a train, publish or save in flight
            self.learners.rank0.get_version.remote(),
            self.cfg.learner.step_timeout_s,
            "get_version",
            self.learners.names[0],
            "raise learner.step_timeout_s if steps are this slow",
        )
        path = self.run_dir / "checkpoints" / f"step_{step}"
        if (path / "COMPLETE").exists():
            return path
        return self.saves.start(step, path, pending)

    def checkpoint_now(self) -> Path:
        """A checkpoint written before this returns (the end of the run, Ctrl-C, a failure)."""
        path = self.checkpoint()
        self.saves.wait()
        return path

    # ------------------------------------------------------------ teardown

    def shutdown(self) -> None:
        import ray

        if self.fatal:
            self._kill_actors()
        for pool in (self.generators, self.eval_generators, self.executors):
            if pool is not None:
                pool.shutdown()
        if self.learners is not None:
            try:
                self.learners.shutdown()
            except Exception as err:
                self.log(f"learner shutdown: {err}")
        for client in (self.client, self.release_client):
            if client is not None:
                client.close()
        if self.buffer is not None:
            try:
                ray.get(self.buffer.shutdown.remote(), timeout=30)
            except Exception:
                pass

        release_all()  # every replica's placement group, the learner ranks' too (also on errors)
        self.metrics.close()
        if ray.is_initialized():
            ray.shutdown()

    def _kill_actors(self) -> None:
        """The buffer is gone: kill replicas and learner ranks at once. Asked to stop, each
        would first wait out its request to the dead buffer and then fail to return its
        leases; there are none left to return."""

        for pool in (self.generators, self.eval_generators, self.executors):
            if pool is None:
                continue
            for r in [*pool.pending, *pool.replicas.values()]:
                try:
                    pool.discard(r)
                except Exception as err:
                    self.log(f"{r.name}: {err}")
            pool.pending.clear()
            pool.replicas.clear()
        self._kill_learners()
        self.learners = None
        self.log("killed the generators, executors and learner ranks (the buffer is gone)")

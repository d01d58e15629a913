"""Learner rank actor: one FSDP2 rank of the learner group (learner/ does the training).

Rank 0 also talks to the buffer (pulls batches at its version, announces new versions) and
serves the newest weights to generators (actors/weights/publisher.py). Every rank receives the whole
batch from rank 0 over the learner's process group (learner/intake.py: `broadcast`; the driver
passes nothing) and trains on its share (learner/packing.py plans micro-batches per rank).
Step time is reported split into wait-for-data / compute / sync.

The actor is threaded (generators call `send_weights` while the driver calls `train`), and
`WorkLock` keeps the learner's collectives (train, publish, save) and weight sends over an
NCCL channel apart; a gloo channel sends the CPU copy and overlaps training. Its threads come
in Ray concurrency groups (`CONCURRENCY_GROUPS`, applied in actors/remote.py), so no kind of
call can take the threads another kind needs: sends that wait for the lock never leave
`publish` or the driver's liveness probe without a thread.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from microcoder.actors.config import LearnerRankSettings
from microcoder.actors.logs import redirect_to_run_dir
from microcoder.actors.memory import measure
from microcoder.actors.weights.publisher import WeightPublisher
from microcoder.actors.weights.relay_hub import RelayHub, hub_for
from microcoder.actors.weights.work_lock import WorkLock
from microcoder.protocol import ActorMemory

CONCURRENCY_GROUPS: dict[str, tuple[str, ...]] = {
    "control": (
        "where",
        "rendezvous",
        "latest_version",
        "weight_channel_host",
        "open_weight_channel",
        "batch_digest",
        "join_relay",
        "leave_relay",
        "relay_status",
        "memory",
    ),
    "data": ("fetch_batch",),
    "weights": ("send_weights",),
}
"""Rank 0's threads, by kind of call (Ray concurrency groups; each group has its own threads).
- "control": the calls that answer at once and never wait for a lock or a peer: the driver's
  liveness probe and the generators' version polls (`latest_version`), opening a channel,
  the relay's membership and status (actors/weights/relay_hub.py: its rounds run on its own thread).
- "data": `fetch_batch`, which may wait for the buffer up to `learner.batch_wait_s`.
- "weights": `send_weights`, one per generator syncing; over NCCL each waits for `WorkLock`
  up to `learner.sync_timeout_s`.
- Every other method (setup, train, publish, save, get_version, set_dynamic_filtering,
  shutdown: the driver's learner calls, one at a time) runs in Ray's default group of
  `LEARNER_THREADS`. So a publish always has a thread, whatever the sends do.
A new method that may wait must not go into "control"."""

LEARNER_THREADS = 2
"""The default group: the driver's one learner call at a time, and a `shutdown` beside it."""

MIN_WEIGHT_GENERATORS = 16
"""The generator count the "weights" group is sized for at least (`scale` may add generators
to a live run, and Ray cannot resize a group)."""


def group_sizes(generators: int) -> dict[str, int]:
    """Threads per concurrency group for a run of `generators` generators (`num_engines`).

    "weights" has two threads per generator, for max(generators, MIN_WEIGHT_GENERATORS): each
    generator waits for one send at a time, and may have left one more behind (a send whose
    reply it stopped waiting for, still running to its own deadline on rank 0). A send beyond
    that (a run scaled past the bound) waits in Ray's queue behind other sends only, never
    behind a control, data or learner call."""
    return {
        "control": 4,
        "data": 1,
        "weights": 2 * max(int(generators), MIN_WEIGHT_GENERATORS),
    }


class LearnerRank:
    """Ray actor body for rank `rank` of `world`; call `setup()` on all ranks at once."""

    def __init__(self, rank: int, world: int):
        self.log_path = redirect_to_run_dir(f"learner-{rank}")
        self.rank = rank
        self.world = world
        self.learner = None
        self.client = None
        self.publisher = None
        self.relay = None  # rank 0 with learner.weight_transport = "relay": its RelayHub
        self._stop = False
        self._batch = None  # rank 0: the PackedBatch fetched for the next train
        self.last_digest = None  # the digest of the batch this rank last received
        self._work = WorkLock()  # train / publish / save / weight sends: one at a time
        self.pending_save = None  # the checkpoint its background writer writes (start_save)

    def where(self) -> dict[str, Any]:
        """This rank's node IP, pid and log file, for errors that name it (the driver asks first,
        which also tells it the actor is up)."""
        import ray

        return {"ip": ray.util.get_node_ip_address(), "pid": os.getpid(), "log": self.log_path}

    def memory(self) -> ActorMemory:
        """This rank's memory (actors/memory.py): RSS of its process and, on a CUDA device,
        torch's allocated, reserved and peak bytes. A "control" call: answers at once, mid-step
        too."""
        device = self.learner.device if self.learner is not None else None
        return measure(f"learner-{self.rank}", "learner", device=device)

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: this node's address and a free port for the learner's process group."""
        import ray

        from microcoder.learner.distributed import free_port

        ip = ray.util.get_node_ip_address()
        return ip, free_port(ip)  # free on the interface the group binds

    def setup(
        self,
        settings: LearnerRankSettings,
        model_path: str,
        buffer_address: str,
        master: tuple[str, int],
        resume_from: str | None = None,
    ) -> int:
        """Collective: build the sharded policy (or resume it); returns the policy version."""
        from microcoder.learner.distributed import init_distributed, pick_device, set_rank_env
        from microcoder.learner.trainer import Learner

        set_rank_env(self.rank, self.world, master)

        s = self.settings = settings
        self.dynamic_filtering = s.algorithm.dynamic_filtering
        # The group first, with the run's collective deadline (Learner joins an existing group).
        init_distributed(pick_device(s.device), s.learner.collective_timeout_s)
        kwargs = dict(seed=s.seed, device=s.device, total_steps=s.total_steps)
        kwargs["config_overrides"] = s.config_overrides  # model.config_overrides
        if resume_from:
            self.learner = Learner.from_checkpoint(resume_from, s.learner, s.algorithm, **kwargs)
        else:
            self.learner = Learner(model_path, s.learner, s.algorithm, **kwargs)
        if self.rank == 0:
            from microcoder.buffer.client import BufferClient

            self.client = BufferClient.from_config(s.buffer, buffer_address, owner="learner")
            self.publisher = WeightPublisher(  # channels bind this node's IP, as Ray reports it
                s.learner.sync_timeout_s, device=self.learner.device.type
            )
            self.start_relay(s.learner)
        self.publish()
        return self.learner.version

    @property
    def version(self) -> int:
        return self.learner.version

    def get_version(self) -> int:
        """The policy version, after any train/publish/save in flight (the actor is threaded)."""
        with self._work.learner():
            return self.learner.version

    # ------------------------------------------------------------ rank 0: data

    def set_dynamic_filtering(self, on: bool) -> None:
        """Filter all-equal groups (DAPO) from the next batch on, or not: rank 0 when it fetches
        (`fetch_batch`), and a caller's SampleGroups in `Learner.train_step`."""
        with self._work.learner():
            self.dynamic_filtering = bool(on)
            self.learner.algo = self.learner.algo.model_copy(update={"dynamic_filtering": bool(on)})

    def fetch_batch(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Rank 0: `batch_size` scored groups within the staleness bound, packed into one
        PackedBatch (learner/intake.py) that stays here until the next `train` broadcasts it to
        every rank over the learner's process group: the driver gets only the batch's size and
        statistics (IntakeStats, each metric computed once, here). The one dynamic filter runs
        here: groups whose rewards are all equal are dropped and more are fetched until the batch
        is full (DAPO); they count as consumed by the buffer and in `filtered_groups`, and are
        reported to the buffer (with the next get_batch) so admission control does not count them
        as trained: a weak model whose groups are all filtered must not starve the generators.
        The step's verdict metrics (learner/verdict_stats.py) are taken here over the groups
        kept (and, on a multi-turn run, its trajectory metrics: turns, pass rate per turn,
        feedback tokens), its per-source metrics (`data`) over every group fetched; on a `monitor.rollouts_every` step the groups come with their texts and the reply
        carries the step's rollouts rows (actors/rollouts.py) under "rollouts"."""
        from microcoder.actors import rollouts
        from microcoder.actors.convert import (
            Intake,
            component_inputs,
            source_inputs,
            trajectory_inputs,
            verdict_inputs,
        )
        from microcoder.learner.intake import pack
        from microcoder.learner.verdict_stats import (
            reward_component_means,
            source_metrics,
            step_verdict_metrics,
            trajectory_metrics,
        )

        want = self.settings.learner.batch_size
        budget = want * self.settings.learner.max_filtered_batches  # groups we may fetch in all
        step = self.learner.version + 1  # the step this batch trains
        texts = rollouts.due(step, self.settings.rollouts_every)
        got = Intake()
        t0 = time.perf_counter()
        deadline = None if timeout_s is None else t0 + timeout_s
        # 1. Fetch until the batch is full (a filtered group is replaced), the buffer is done,
        #    the budget is spent or the rank stops; report what will not train (admission).
        while len(got.kept) < want and not got.done and len(got.responses) < budget:
            if self._stop:
                break
            n = min(want - len(got.kept), budget - len(got.responses))
            batch = self._get_batch(n, texts, deadline, timeout_s)
            if batch is not None:  # untrained groups give their capacity back
                self.client.report_filtered(got.add(batch, self.dynamic_filtering))
        # 2. Pack what was kept: the next train broadcasts it.
        t1 = time.perf_counter()
        self._batch = pack(got.kept) if got.kept else None
        stats = got.stats(packed_from=t1)
        # 3. The reply: the batch's size and its metrics (each computed once, here).
        trained = got.trained()
        out = {
            "n_groups": len(got.kept),
            "done": got.done,
            "wait_s": t1 - t0,
            "metrics": stats.metrics()
            | step_verdict_metrics(verdict_inputs(trained))
            | reward_component_means(component_inputs(trained))
            | trajectory_metrics(trajectory_inputs(trained))
            | source_metrics(source_inputs(got.fetched())),
        }
        if texts and got.kept:
            out["rollouts"] = self._rollout_rows(step, got.kept, trained)
        return out

    def _get_batch(self, n: int, texts: bool, deadline: float | None, timeout_s: float | None):
        """Rank 0: one `get_batch` of up to `n` groups, waiting 1 s; None when none came in that
        second (an error once `deadline` has passed, naming learner.batch_wait_s)."""
        from microcoder.buffer.client import BufferTimeout, BufferUnreachable

        try:
            return self.client.get_batch(n, self.learner.version, timeout_s=1.0, text=texts)
        except BufferUnreachable:
            raise  # the buffer itself does not answer: no batch will come from waiting
        except BufferTimeout as err:
            if deadline is not None and time.perf_counter() > deadline:
                raise BufferTimeout(
                    f"learner rank 0 got no batch within learner.batch_wait_s = {timeout_s:.0f}"
                    f" s: {err}; the launcher's waiting notices say what the generators and "
                    "executors did; raise learner.batch_wait_s (0 = no limit) if they are slow"
                ) from None
            return None

    def _rollout_rows(self, step: int, kept, trained) -> list[dict[str, Any]]:
        """Rank 0: the rollouts rows of the batch it just packed (actors/rollouts.py), with the
        advantages and mask decisions `train` will compute: the same batch, algorithm and
        seeded mask draws (learner/batch.py: `build_batch`, `mask_generator`)."""
        from microcoder.actors import rollouts
        from microcoder.learner.batch import build_batch, mask_generator

        lrn = self.learner
        built = build_batch(self._batch, lrn.algo, mask_generator(lrn.seed, lrn.version))
        done = rollouts.trained_responses(kept, built.advantages, built.masked)
        return rollouts.rollout_rows(step, trained, done, self.settings.rollouts_max)

    # ------------------------------------------------------------ all ranks

    def train(self, groups=None) -> dict[str, float]:
        """Collective: one policy version's worth of optimizer steps. In a run (`groups` None)
        every rank first receives the batch rank 0 fetched (learner/intake.py: `broadcast`, over
        the learner's process group, within learner.collective_timeout_s); benchmarks may pass
        their own SampleGroups instead, the same on every rank. No NCCL weight send runs from
        here to the end of the `publish` that follows (WorkLock)."""
        with self._work.learner(opens_step=True), self._collective("train"):
            t0 = time.perf_counter()
            batch = groups if groups is not None else self._receive_batch()
            t1 = time.perf_counter()
            metrics = self.learner.train_step(batch)
            metrics["broadcast_s"] = t1 - t0
            metrics["compute_s"] = time.perf_counter() - t0
            return metrics

    def _receive_batch(self):
        """Every rank: rank 0's fetched PackedBatch, broadcast (rank 0 lets go of its copy)."""
        from microcoder.learner.intake import broadcast, digest

        mine, self._batch = (self._batch, None) if self.rank == 0 else (None, None)
        if self.rank == 0 and mine is None:
            raise RuntimeError("learner rank 0: train called with no batch fetched (fetch_batch)")
        batch = broadcast(mine, self.learner.device)
        self.last_digest = digest(batch)
        return batch

    def batch_digest(self) -> dict[str, Any] | None:
        """Group ids and hashes of the tokens and log-probs of the batch this rank last received
        (learner/intake.py: `digest`): equal on every rank; None before the first."""
        return self.last_digest

    def publish(self) -> dict[str, float]:
        """Collective: gather the full weights; rank 0 keeps them for generators and announces the
        version to the buffer (so admission control and staleness move on)."""
        with self._work.learner(closes_step=True), self._collective("publish"):
            t0 = time.perf_counter()
            state = self.learner.published_state()  # the adapter alone under learner.lora
            gather_s = time.perf_counter() - t0
            if self.rank == 0:
                self.publisher.publish(self.learner.version, state)
                self.client.announce_version(self.learner.version)
            return {"gather_s": gather_s}

    def save(self, path: str) -> str:
        """Collective: checkpoint (HF folder + optimizer/scheduler/RNG/version)."""
        with self._work.learner(), self._collective("save"):  # never mid-step (Ctrl-C)
            return str(self.learner.save_checkpoint(path))

    def start_save(self, path: str) -> None:
        """Collective: snapshot a checkpoint to host memory and return; a background writer
        writes it to `path` (learner/checkpoint.py: start_save). `save_done` says when."""
        from microcoder.learner.checkpoint import start_save

        with self._work.learner(), self._collective("save"):  # never mid-step (Ctrl-C)
            if self.pending_save is not None:  # the driver waits first; never two in flight
                self.pending_save.wait(self.settings.learner.step_timeout_s)
            self.pending_save = start_save(self.learner, Path(path))

    def save_done(self) -> bool:
        """Whether this rank's writer of the last `start_save` is done (True when none ran);
        raises what the writer failed with."""
        pending = self.pending_save
        if pending is None or not pending.done():
            return pending is None
        self.pending_save = None
        pending.wait(0)
        return True

    def _collective(self, what: str):
        """A collective that timed out waiting for another rank says what to do."""
        from microcoder.learner.distributed import named_collective

        return named_collective(what, self.settings.learner.collective_timeout_s)

    # ------------------------------------------------------------ rank 0: weights to generators

    def latest_version(self) -> int:
        return self.publisher.version if self.publisher else -1

    def weight_channel_host(self) -> str:
        """Rank 0: the address its weight channels bind and publish (this node's IP)."""
        return self.publisher.host

    def open_weight_channel(self, name: str) -> dict[str, Any]:
        """Rank 0: open a weight channel for generator `name`; returns what it must join."""
        return self.publisher.open_channel(name)

    def send_weights(
        self, name: str, ticket: str | None = None, port: int | None = None
    ) -> dict[str, Any]:
        """Rank 0, called for a generator (in a thread of the "weights" group). A channel that
        broadcasts from the GPU (NCCL) sends only while no train, publish or save runs, and
        outside a step (WorkLock): two streams of NCCL collectives on one GPU can deadlock.
        Other generators' sends may run beside it. A gloo channel sends the CPU copy of the
        published weights, no collective on the learner's device, so it goes at once and the
        generator does not idle for a step. `lock_wait_s`: how long it waited for the learner.
        Only then is the generator told to pause its engine (`ticket`: the ready signal in the
        channel's store), so its engine keeps generating while this send waits; a generator
        that does not start receiving soon after holds the learner no longer than
        `PAUSE_HOLD_S` (actors/weights/publisher.py `WeightPublisher.send`). `port` is the channel
        it asked on."""
        if not self.publisher.sends_from_device(name):
            return {**self.publisher.send(name, ticket, port), "lock_wait_s": 0.0}
        timeout_s = self.settings.learner.sync_timeout_s
        return self.publisher.send(
            name, ticket, port, exclusive=lambda: self._work.send(timeout_s, name)
        )

    def start_relay(self, learner_cfg) -> None:
        """Rank 0: the relay's hub with learner.weight_transport "relay" (actors/weights/relay_hub.py)."""

        self.relay = hub_for(self.publisher, learner_cfg, self._work)

    def join_relay(self, name: str, workers: int) -> dict[str, Any]:
        """Rank 0: generator `name` joins the relay at the next version (actors/weights/relay_hub.py)."""

        if self.relay is None:
            RelayHub.refuse(name)
        return self.relay.join(name, workers)

    def leave_relay(self, name: str) -> None:
        if self.relay is not None:
            self.relay.leave(name)

    def relay_status(self, name: str) -> dict[str, Any]:
        """Rank 0: the relay's epoch and round as generator `name` needs them (answers at once)."""
        if self.relay is None:
            return {"member": "out", "epoch": None, "round": None, "last": {}, "latest": -1}
        return self.relay.status(name)

    def shutdown(self) -> None:
        import torch.distributed as dist

        if self.relay is not None:
            self.relay.close()
        self._stop = True
        time.sleep(1.5)  # let a fetch_batch in another thread see the flag and return
        if self.client is not None:
            self.client.close()
        if dist.is_initialized():
            dist.destroy_process_group()

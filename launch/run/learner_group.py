"""The learner group seen from the driver: W LearnerRank actors (actors/learner_rank.py) acting
as one learner. Driver-side: it places the ranks and drives their steps, so it lives in launch/
and hands each rank only its sections (launch/run/actor_settings.py: `learner_rank_settings`).

One `step()` = rank 0 pulls a batch at its version (wait-for-data), every rank trains on it
(compute), every rank joins the weight gather and rank 0 publishes the version (sync).
The batch never travels through the driver: rank 0 keeps it (`LearnerRank.fetch_batch`) and
broadcasts it to every rank over the learner's process group inside `train`; the driver reads
only its size and statistics, each metric computed once on rank 0 (learner/intake.py:
IntakeStats) and never overlapping the train's own metrics.

Every wait on the ranks has a deadline (actors/deadline.py: `get_within`), and its error names
the rank (node IP, pid, log file) and the field to raise: start and setup `cluster.
ready_timeout_s`; train, publish and save `learner.step_timeout_s`; the batch
`learner.batch_wait_s` (0 = none: a learner waiting for generators is legitimate, and the
launcher says what they do every 30 s). After a rank was stuck or failed mid-collective the
group is broken: `save` refuses at once and `shutdown` kills the ranks instead of waiting.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from microcoder.actors.deadline import PeerFailed, PeerTimeout, get_within
from microcoder.actors.remote import learner_rank_cls
from microcoder.launch.config import Config
from microcoder.launch.run.actor_settings import learner_rank_settings
from microcoder.launch.run.learner_placement import learner_rank_options
from microcoder.launch.run.placement import release
from microcoder.launch.run.pools import answers
from microcoder.launch.run.step_result import StepResult
from microcoder.protocol import ActorMemory

SHUTDOWN_S = 30.0
"""How long the driver waits for the ranks to leave their process group at shutdown."""


class LearnerGroup:
    def __init__(
        self,
        cfg: Config,
        model_path: str,
        buffer_address: str,
        resume_from: str | None = None,
        rank_cls=None,
    ):
        """`rank_cls`: the Ray actor class of a rank (default: LearnerRank's, actors/remote.py)."""

        self.cfg = cfg
        W = cfg.learner.world_size
        # rank 0's send threads: one channel per generator, the eval's set-aside ones too
        engines = cfg.generator.num_engines + cfg.eval.generators
        cls = rank_cls or learner_rank_cls(cfg.learner, engines)
        settings = learner_rank_settings(cfg)

        lc = cfg.learner
        # The ranks share placement groups, packed on as few nodes as possible (one per node).
        options, self.group_names = learner_rank_options(
            W, 1, lc.gpus_per_rank, cfg.cluster.device, lc.resources
        )
        self.rank0_name = f"mc-learner-0-{uuid.uuid4().hex[:8]}"
        """Rank 0's Ray actor name: generators look the weight publisher up by it
        (actors/generator.py), so no actor handle is a generator's constructor argument. Unique
        per group, so a new group never meets the name of one still being torn down."""
        self.ranks = [
            cls.options(**options[r], **({"name": self.rank0_name} if r == 0 else {})).remote(r, W)
            for r in range(W)
        ]
        self.names = [f"learner rank {r}" for r in range(W)]
        self.broken = ""  # why the group can no longer run a collective ("" = it can)
        try:
            versions = self._start(settings, model_path, buffer_address, resume_from)
        except (PeerTimeout, PeerFailed):
            self.broken = self.broken or "setup failed"
            self.shutdown()  # kills the ranks: none is left hanging in its setup
            raise
        if len(set(versions)) != 1:
            raise RuntimeError(
                f"learner ranks disagree on the policy version after setup: {versions}"
            )
        self.version = versions[0]

    def _start(self, settings, model_path, buffer_address, resume_from) -> list[int]:
        """Wait for every rank to be up (learning its node and pid), then the rendezvous and the
        collective setup, each within cluster.ready_timeout_s; returns the ranks' versions."""
        ready = self.cfg.cluster.ready_timeout_s
        slow = "raise cluster.ready_timeout_s if it is only slow"
        where = self._wait(
            "starting",
            [r.where.remote() for r in self.ranks],
            ready,
            "the cluster may lack free CPUs/GPUs for it (see the placement plan); " + slow,
        )
        self.names = [_rank_name(r, w) for r, w in enumerate(where)]
        master = self._wait("rendezvous", [self.ranks[0].rendezvous.remote()], ready, slow)[0]
        return self._wait(
            "setup (loading the model, joining the process group)",
            [
                r.setup.remote(settings, model_path, buffer_address, master, resume_from)
                for r in self.ranks
            ],
            ready,
            "see its log; " + slow,
        )

    @property
    def rank0(self):
        return self.ranks[0]

    def step(
        self, timeout_s: float | None = None, on_wait=None, notice_s: float = 30.0
    ) -> StepResult | None:
        """One policy version. Returns the step, typed (launch/run/step_result.py: the control
        values apart from the logged metrics), or None when the run's data is done.
        While rank 0 waits for its batch, `on_wait(seconds waited)` is called every `notice_s`;
        `timeout_s` bounds the wait (BufferTimeout from rank 0); each notice also checks that
        rank 0 still answers (within learner.sync_timeout_s), so a stuck rank 0 is named even
        with no batch limit. On a `monitor.rollouts_every` step the result carries rank 0's
        rollouts rows in `rollouts` (the caller writes them: actors/rollouts.py)."""
        import ray

        t0 = time.perf_counter()
        ref = self.rank0.fetch_batch.remote(timeout_s)
        # Rank 0 ends its own wait at timeout_s; past that (and a buffer request's deadline)
        # rank 0 itself does not answer.
        limit = None if timeout_s is None else timeout_s + self.cfg.buffer.request_timeout_s
        while not ray.wait([ref], timeout=notice_s)[0]:
            waited = time.perf_counter() - t0
            if on_wait is not None:
                on_wait(waited)
            # Waiting is legitimate (also with no limit), a rank 0 that stopped answering is not:
            # latest_version runs in rank 0's "control" threads, which no send or fetch can hold.
            self._wait(
                "latest_version (asked while it waits for a batch)",
                [self.rank0.latest_version.remote()],
                self.cfg.learner.sync_timeout_s,
                "it is stuck: see its log",
            )
            if limit is not None and waited > limit + notice_s:
                self.broken = f"{self.names[0]} did not return from fetch_batch"
                raise PeerTimeout(
                    f"{self.names[0]} did not return a batch within {waited:.0f} s although "
                    f"learner.batch_wait_s = {timeout_s:.0f} s: it is stuck; see its log",
                    [self.names[0]],
                )
        batch = ray.get(ref)  # the batch's size and statistics: the groups stay on rank 0
        if not batch["n_groups"]:
            if batch["done"]:
                return None
            # Every fetched group was filtered: no optimizer step, version unchanged.
            return StepResult.of(
                {
                    **batch["metrics"],
                    "skipped": 1.0,
                    "version": float(self.version),
                    "groups": 0.0,
                    "wait_s": time.perf_counter() - t0,
                    "compute_s": 0.0,
                    "sync_s": 0.0,
                }
            )
        t1 = time.perf_counter()
        # No batch in the call: rank 0 broadcasts it to the others inside `train`.
        metrics = self._step_call("train", [r.train.remote() for r in self.ranks])[0]
        t2 = time.perf_counter()
        gather = self._step_call(
            "publish (the weight gather)", [r.publish.remote() for r in self.ranks]
        )[0]
        t3 = time.perf_counter()
        self.version = int(metrics["version"])
        return StepResult.of(
            {
                **metrics,
                **batch["metrics"],  # reward_mean, filtered_groups, staleness_*, diversity, pack_s
                "wait_s": t1 - t0,
                "compute_s": t2 - t1,
                "sync_s": t3 - t2,
                "gather_s": gather["gather_s"],
                **({"rollouts": batch["rollouts"]} if "rollouts" in batch else {}),
            }
        )

    def memory(self, timeout_s: float = 5.0) -> list[ActorMemory]:
        """Every rank's `memory()` (a "control" call: it answers mid-step too); a rank that does
        not answer within `timeout_s` is left out."""
        refs = {name: r.memory.remote() for name, r in zip(self.names, self.ranks, strict=True)}
        return [m for m in answers(refs, timeout_s).values() if isinstance(m, ActorMemory)]

    def set_dynamic_filtering(self, on: bool) -> None:
        """Switch dynamic filtering for the rest of the run, on every rank."""
        self._step_call(
            "set_dynamic_filtering", [r.set_dynamic_filtering.remote(on) for r in self.ranks]
        )

    def refuse_if_broken(self, path: str) -> None:
        if self.broken:
            raise RuntimeError(
                f"not saving {path}: the learner group is broken ({self.broken}); resume from "
                "the newest checkpoint"
            )

    def save(self, path: str) -> str:
        self.refuse_if_broken(path)
        return self._step_call("save", [r.save.remote(path) for r in self.ranks])[0]

    def start_save(self, path: str) -> None:
        """Collective: every rank snapshots the checkpoint `path` to host memory and returns;
        their writers write it in the background (`save_done`)."""
        self.refuse_if_broken(path)
        self._step_call("save", [r.start_save.remote(path) for r in self.ranks])

    def save_done(self) -> bool:
        """Whether every rank's writer of the last `start_save` is done; raises a writer's
        error."""
        self.refuse_if_broken("the checkpoint")
        return all(self._step_call("save_done", [r.save_done.remote() for r in self.ranks]))

    def shutdown(self) -> None:
        """Every rank leaves its process group; a broken group's ranks (or ranks that do not
        leave within SHUTDOWN_S) are killed instead."""
        import ray

        try:
            if not self.broken:
                self._wait(
                    "shutdown", [r.shutdown.remote() for r in self.ranks], SHUTDOWN_S, "killed"
                )
        except (PeerTimeout, PeerFailed):
            pass
        finally:
            if self.broken:
                for r in self.ranks:
                    ray.kill(r, no_restart=True)
            release(*self.group_names)

    def _step_call(self, what: str, refs: list) -> list:
        return self._wait(
            what,
            refs,
            self.cfg.learner.step_timeout_s,
            "raise learner.step_timeout_s if steps are this slow; else that rank is stuck "
            "(a hung device or collective): its log says where",
        )

    def _wait(self, what: str, refs: list, timeout_s: float, remedy: str) -> list:
        """`get_within` on one call per rank (rank 0 first); a timeout or a failure while other
        ranks still run marks the group broken."""
        names = self.names[: len(refs)]
        try:
            return get_within(refs, timeout_s, what, names, remedy)
        except PeerTimeout as err:
            self.broken = f"{', '.join(err.peers)} stuck in {what}"
            raise
        except PeerFailed as err:
            self.broken = f"{what} failed while {', '.join(err.running)} still ran"
            raise


def _rank_name(rank: int, where: dict[str, Any]) -> str:
    """'learner rank 1 on 10.0.0.2 pid 4242 (log RUN_DIR/logs/learner-1.log)'."""
    log = f" (log {where['log']})" if where.get("log") else ""
    return f"learner rank {rank} on {where['ip']} pid {where['pid']}{log}"

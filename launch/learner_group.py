"""The learner group seen from the driver: W LearnerRank actors (actors/learner_rank.py) acting
as one learner. Driver-side: it places the ranks and drives their steps, so it lives in launch/
and hands each rank only its sections (launch/actor_settings.py: `learner_rank_settings`).

One `step()` = rank 0 pulls a batch at its version (wait-for-data), every rank trains on it
(compute), every rank joins the weight gather and rank 0 publishes the version (sync).
The batch never travels through the driver: rank 0 puts it in its object store and the driver
hands each rank only the ref (`LearnerRank.fetch_batch`), plus reads the batch's statistics.
"""

from __future__ import annotations

import time
from typing import Any

from microcoder.launch.config import Config


class LearnerGroup:
    def __init__(
        self, cfg: Config, model_path: str, buffer_address: str, resume_from: str | None = None
    ):
        import ray

        from microcoder.actors.remote import learner_rank_cls
        from microcoder.launch.actor_settings import learner_rank_settings
        from microcoder.launch.placement import replica_options

        self.cfg, W = cfg, cfg.learner.world_size
        cls = learner_rank_cls(cfg.learner)
        settings = learner_rank_settings(cfg)

        lc = cfg.learner
        self.ranks = [
            cls.options(
                **replica_options(
                    1, lc.gpus_per_rank, cfg.cluster.device, f"learner-{r}", resources=lc.resources
                )
            ).remote(r, W)
            for r in range(W)
        ]
        master = ray.get(self.ranks[0].rendezvous.remote())
        versions = ray.get(
            [
                r.setup.remote(settings, model_path, buffer_address, master, resume_from)
                for r in self.ranks
            ]
        )
        if len(set(versions)) != 1:
            raise RuntimeError(
                f"learner ranks disagree on the policy version after setup: {versions}"
            )
        self.version = versions[0]

    @property
    def rank0(self):
        return self.ranks[0]

    def step(
        self, timeout_s: float | None = None, on_wait=None, notice_s: float = 30.0
    ) -> dict[str, Any] | None:
        """One policy version. Returns the step's metrics, or None when the run's data is done.
        While rank 0 waits for its batch, `on_wait(seconds waited)` is called every `notice_s`;
        `timeout_s` bounds the wait (BufferTimeout from rank 0)."""
        import ray

        t0 = time.perf_counter()
        ref = self.rank0.fetch_batch.remote(timeout_s)
        while not ray.wait([ref], timeout=notice_s)[0]:
            if on_wait is not None:
                on_wait(time.perf_counter() - t0)
        batch = ray.get(ref)  # statistics and the ref of the groups, not the groups
        if not batch["n_groups"]:
            if batch["done"]:
                return None
            return {  # every fetched group was filtered: no optimizer step, version unchanged
                "skipped": 1.0,
                "version": float(self.version),
                "groups": 0.0,
                "reward_mean": batch["batch_reward_mean"],
                "diversity": batch["diversity"],
                "filtered_groups": float(batch["filtered_groups"]),
                "wait_s": time.perf_counter() - t0,
                "compute_s": 0.0,
                "sync_s": 0.0,
            }
        t1 = time.perf_counter()
        groups_ref = batch["groups_ref"]  # each rank fetches the groups from rank 0's node
        metrics = ray.get([r.train.remote(groups_ref) for r in self.ranks])[0]
        t2 = time.perf_counter()
        gather = ray.get([r.publish.remote() for r in self.ranks])[0]
        t3 = time.perf_counter()
        self.version = int(metrics["version"])
        staleness = batch["staleness"]
        return {
            **metrics,
            "reward_mean": batch["batch_reward_mean"],
            "filtered_groups": float(batch["filtered_groups"]),
            "staleness_mean": sum(staleness) / max(len(staleness), 1),
            "staleness_max": float(max(staleness, default=0)),
            "wait_s": t1 - t0,
            "compute_s": t2 - t1,
            "sync_s": t3 - t2,
            "gather_s": gather["gather_s"],
            "diversity": batch.get("diversity", 0.0),
        }

    def set_dynamic_filtering(self, on: bool) -> None:
        """Switch dynamic filtering for the rest of the run, on every rank."""
        import ray

        ray.get([r.set_dynamic_filtering.remote(on) for r in self.ranks])

    def save(self, path: str) -> str:
        import ray

        return ray.get([r.save.remote(path) for r in self.ranks])[0]

    def shutdown(self) -> None:
        import ray

        from microcoder.launch.placement import release

        ray.get([r.shutdown.remote() for r in self.ranks])
        release(*(f"learner-{r}" for r in range(len(self.ranks))))

"""One learner rank for the HSDP tests, run as a script with the rendezvous in the env.

    python hsdp_worker.py MODEL OUT {train,from:CKPT} MICRO_BATCH_TOKENS [OVERRIDES_JSON]

`train`: a step on train_worker.py's synthetic groups, rank 0 writes OUT/weights1.safetensors,
the checkpoint OUT/ckpt is saved, a second step, OUT/weights2.safetensors. `from:CKPT`: a
Learner resumed from CKPT (saved by another mesh shape, say), the second step only,
OUT/weights2.safetensors. Every rank writes OUT/metrics{rank}.json: {"steps": [step metrics],
"mesh": [mesh shape], "bytes": {what it holds after the last step: parameters, AdamW state},
"micro_batches": [its micro-batches in each step], "cross_replica_all_reduces": [per step],
"fsdp_modules": how many modules fully_shard wrapped}.
OVERRIDES_JSON: {"learner": {...}} merged into the LearnerConfig (replicas, world_size).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist
from safetensors.torch import save_file
from torch.distributed.fsdp import FSDPModule
from train_worker import synthetic_groups

from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.distributed import close_distributed
from microcoder.learner.mesh import local_bytes
from microcoder.learner.trainer import Learner


def write_weights(learner: Learner, path: Path) -> None:
    """Collective: the full fp32 weights, saved by rank 0 (publish's path: full_state_dict)."""
    weights = learner.full_state_dict()
    if learner.rank == 0:
        save_file({k: v.contiguous() for k, v in weights.items()}, path)


def held_bytes(learner: Learner) -> dict[str, int]:
    """Bytes of parameters and of AdamW state (moments; the step counts too) on this rank."""
    params = list(learner.model.parameters())
    state = [v for s in learner.optimizer.state.values() for v in s.values() if v.dim() > 0]
    return {"params": local_bytes(params), "optimizer": local_bytes(state)}


def count_micro_batches(learner: Learner, counts: list[int]) -> None:
    """Append to `counts` how many micro-batches this rank trains on in each mini-batch."""
    plan = learner._micro_batches

    def counted(batch):
        micros = plan(batch)
        counts.append(len(micros))
        return micros

    learner._micro_batches = counted


def count_cross_replica_all_reduces(learner: Learner, counts: list[int]) -> None:
    """Wrap `learner.train_step` to append, per step, how many all-reduces ran over this rank's
    replicate group (FSDP2's cross-replica gradient reduce; none on a 1-D mesh)."""
    mesh, step, real = next(learner.model.parameters()).device_mesh, learner.train_step, None
    peers = dist.get_process_group_ranks(mesh.get_group("replicate")) if mesh.ndim == 2 else None

    def counted_step(batch):
        nonlocal real
        real, calls = dist.all_reduce, []

        def all_reduce(tensor, *args, group=None, **kwargs):
            calls.append(group is not None and dist.get_process_group_ranks(group) == peers)
            return real(tensor, *args, group=group, **kwargs)

        dist.all_reduce = all_reduce
        try:
            return step(batch)
        finally:
            dist.all_reduce = real
            counts.append(sum(calls))

    learner.train_step = counted_step


def main() -> None:
    model, out, mode, budget = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    cfg = LearnerConfig(lr=1e-3, micro_batch_tokens=budget, grad_clip=100.0, **extra["learner"])
    algo = AlgorithmConfig(rho=0.5)
    record: dict = {"steps": []}
    counts: list[int] = []
    all_reduces: list[int] = []
    if mode.startswith("from:"):
        learner = Learner.from_checkpoint(mode[5:], cfg, algo, seed=3)
        count_micro_batches(learner, counts)
        count_cross_replica_all_reduces(learner, all_reduces)
    else:
        learner = Learner(model, cfg, algo, seed=3)
        count_micro_batches(learner, counts)
        count_cross_replica_all_reduces(learner, all_reduces)
        record["steps"].append(learner.train_step(synthetic_groups(0)))
        write_weights(learner, out / "weights1.safetensors")
        learner.save_checkpoint(out / "ckpt")
    record["mesh"] = list(next(learner.model.parameters()).device_mesh.shape)
    record["steps"].append(learner.train_step(synthetic_groups(1)))
    record["bytes"] = held_bytes(learner)
    record["micro_batches"] = counts
    record["cross_replica_all_reduces"] = all_reduces
    record["fsdp_modules"] = sum(isinstance(m, FSDPModule) for m in learner.model.modules())
    write_weights(learner, out / "weights2.safetensors")
    (out / f"metrics{learner.rank}.json").write_text(json.dumps(record))
    del learner
    close_distributed()


if __name__ == "__main__":
    main()

"""One learner rank that records its collectives, run as a script with the rendezvous in the env.

    python collective_worker.py MODEL OUT

Under `record_collectives()` from the start: builds the Learner (which joins the group), rank 0
packs synthetic groups and broadcasts them (learner/intake.py), every rank trains one step on
them (two mini-batches, several micro-batches), gathers the weights (publish), saves a
checkpoint, and leaves the group. Writes OUT/collectives{rank}.json: the compute device, the
step's metrics and every collective (collective_recorder.Record).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "learner")]

from collective_recorder import as_dicts, record_collectives  # noqa: E402
from train_worker import synthetic_groups  # noqa: E402

from microcoder.learner.config import AlgorithmConfig, LearnerConfig  # noqa: E402
from microcoder.learner.distributed import close_distributed  # noqa: E402
from microcoder.learner.intake import broadcast, pack_samples  # noqa: E402
from microcoder.learner.trainer import Learner  # noqa: E402


def main() -> None:
    model, out = sys.argv[1], Path(sys.argv[2])
    cfg = LearnerConfig(lr=1e-3, micro_batch_tokens=64, mini_batches=2, grad_clip=100.0)
    with record_collectives() as records:
        learner = Learner(model, cfg, AlgorithmConfig(rho=0.5), seed=3)
        mine = pack_samples(synthetic_groups(0)) if learner.rank == 0 else None
        batch = broadcast(mine, learner.device)
        metrics = learner.train_step(batch)
        learner.full_state_dict()
        learner.save_checkpoint(out / "ckpt")
        device, rank = learner.device.type, learner.rank
        del learner
        close_distributed()
    payload = {"compute_device": device, "metrics": metrics, "records": as_dicts(records)}
    (out / f"collectives{rank}.json").write_text(json.dumps(payload))


if __name__ == "__main__":
    main()

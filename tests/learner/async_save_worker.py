"""One learner rank for the asynchronous-checkpoint tests, run as a script with the rendezvous
in the env.

    python async_save_worker.py MODEL OUT {overlap,kill}

`overlap`: a step, `start_save(OUT/ckpt)`, the second step while the writer writes, then wait;
rank 0 writes OUT/weights.safetensors (after both steps). The checkpoint must hold the state
after step one, untouched by the step that overlapped its write.
`kill`: a step, a complete checkpoint OUT/checkpoints/step_1 (renamed from .partial, COMPLETE),
a second step, then `start_save` of step_2.partial; prints WRITING and sleeps, so the test can
SIGKILL this process while its writer thread writes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from safetensors.torch import save_file
from train_worker import synthetic_groups

from microcoder.learner.checkpoint import partial_path, publish_complete, start_save
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.distributed import close_distributed
from microcoder.learner.trainer import Learner


def main() -> None:
    model, out, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    cfg = LearnerConfig(lr=1e-3, micro_batch_tokens=4096, grad_clip=100.0)
    learner = Learner(model, cfg, AlgorithmConfig(rho=0.5), seed=3)
    learner.train_step(synthetic_groups(0))
    if mode == "overlap":
        pending = start_save(learner, out / "ckpt")
        learner.train_step(synthetic_groups(1))  # while the writer writes
        pending.wait(120)
        weights = learner.full_state_dict()
        if learner.rank == 0:
            save_file({k: v.contiguous() for k, v in weights.items()}, out / "weights.safetensors")
    else:
        final = out / "checkpoints" / "step_1"
        start_save(learner, partial_path(final)).wait(120)
        publish_complete(partial_path(final), final, 1)
        learner.train_step(synthetic_groups(1))
        start_save(learner, partial_path(final.with_name("step_2")))
        print("WRITING", flush=True)
        time.sleep(300)
    del learner
    close_distributed()


if __name__ == "__main__":
    main()

"""One learner rank for the distributed tests, run as a script with the rendezvous in the env.

    python train_worker.py MODEL OUT {train,resume,save,from:CKPT} MICRO_BATCH_TOKENS [OVERRIDES_JSON]

OVERRIDES_JSON: {"learner": {...}, "algorithm": {...}} merged into the configs.

Trains two steps on fixed synthetic groups (in `resume` mode: one step, checkpoint, rebuild the
Learner from the checkpoint, one more step), then rank 0 writes OUT/weights.safetensors and every
rank writes OUT/metrics{rank}.json (under learner.lora the weights are the base and the
adapters, in PEFT's names). `save`: the first step only, then the checkpoint OUT/ckpt;
`from:CKPT`: the second step only, on a Learner resumed from CKPT (another world size may have
saved it).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from safetensors.torch import save_file

from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.distributed import close_distributed
from microcoder.learner.lora import adapter_state_dict
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner


def synthetic_groups(
    step: int, n_groups: int = 3, g: int = 4, vocab: int = 250
) -> list[SampleGroup]:
    """Deterministic groups with mixed rewards, varied lengths, some truncated responses."""
    rng = random.Random(1000 + step)
    groups = []
    for k in range(n_groups):
        prompt = [rng.randrange(vocab) for _ in range(rng.randint(3, 12))]
        samples = []
        for i in range(g):
            resp = [rng.randrange(vocab) for _ in range(rng.randint(2, 30))]
            logp = [-rng.uniform(3.0, 7.0) for _ in resp]
            samples.append(
                TrainSample(
                    prompt, resp, logp, rng.choice([0.8, 1.0, 1.2]), float(i % 2), i == 3, "CE", 0
                )
            )
        groups.append(SampleGroup(f"{step}-{k}", samples))
    return groups


def main() -> None:
    model, out, mode, budget = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    cfg = LearnerConfig(
        lr=1e-3, micro_batch_tokens=budget, grad_clip=100.0, **extra.get("learner", {})
    )
    algo = AlgorithmConfig(rho=0.5, **extra.get("algorithm", {}))
    if mode.startswith("from:"):
        learner, metrics = Learner.from_checkpoint(mode[5:], cfg, algo, seed=3), [{}]
    else:
        learner = Learner(model, cfg, algo, seed=3)
        metrics = [learner.train_step(synthetic_groups(0))]
    if mode in ("resume", "save"):
        learner.save_checkpoint(out / "ckpt")
    if mode == "resume":
        del learner
        learner = Learner.from_checkpoint(out / "ckpt", cfg, algo, seed=3)
    if mode != "save":
        metrics.append(learner.train_step(synthetic_groups(1)))
    weights = learner.full_state_dict()
    if learner.cfg.lora is not None:  # the base and the adapters (full_state_dict: merged)
        weights = learner.base_state_dict() | adapter_state_dict(learner.model)
    if learner.rank == 0:
        save_file({k: v.contiguous() for k, v in weights.items()}, out / "weights.safetensors")
    (out / f"metrics{learner.rank}.json").write_text(json.dumps(metrics))
    del learner
    close_distributed()


if __name__ == "__main__":
    main()

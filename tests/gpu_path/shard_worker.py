"""One learner rank for the gradient-sharding and publish-dtype tests (run as a script with the
rendezvous in the env).

    python shard_worker.py MODEL TIED_MODEL OUT

1. Gradients during accumulation: one step on the same batch with one micro-batch per rank and
   with several (default `learner.grad_sync`, and "last_micro_batch"); records whether every
   gradient was a Shard(0) DTensor of this rank's shard size after each non-final micro-batch,
   and the full gradients and loss of each run (OUT/grads-{name}.safetensors on rank 0).
2. Publish: a bf16 learner (of TIED_MODEL, whose head is its embedding) gathers its weights
   for publishing and as masters; rank 0 saves both and torch's own full state dict
   (get_model_state_dict) as the reference.
Every rank writes OUT/shard{rank}.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "learner"))

from safetensors.torch import save_file  # noqa: E402
from torch.distributed.tensor import DTensor, Shard  # noqa: E402
from train_worker import synthetic_groups  # noqa: E402

from microcoder.learner.config import AlgorithmConfig, LearnerConfig  # noqa: E402
from microcoder.learner.distributed import close_distributed  # noqa: E402
from microcoder.learner.trainer import Learner  # noqa: E402


class Probe(Learner):
    """A Learner that looks at its gradients between micro-batches and before the step."""

    def train_on_batch(self, batch):
        self.sharded_after_non_final: list[bool] = []
        self.micro_batches = 0
        return super().train_on_batch(batch)

    def _set_sync(self, last: bool) -> None:
        if self.micro_batches > 0:  # the previous micro-batch was not the step's last
            self.sharded_after_non_final.append(grads_are_sharded(self.model))
        self.micro_batches += 1
        super()._set_sync(last)

    def _clip_and_step(self):
        self.full_grads = {
            n: p.grad.full_tensor().clone() for n, p in self.model.named_parameters()
        }
        return super()._clip_and_step()


def grads_are_sharded(model: torch.nn.Module) -> bool:
    """Every parameter's gradient exists, as a Shard(0) DTensor holding this rank's shard only."""
    for p in model.parameters():
        g = p.grad
        if not isinstance(g, DTensor) or g.placements != (Shard(0),):
            return False
        if g.to_local().numel() != p.to_local().numel():
            return False
    return True


def main() -> None:
    model, tied, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    algo = AlgorithmConfig(rho=0.5)
    report: dict = {}
    runs = {"one": (4096, {}), "every": (64, {})}  # the default grad_sync
    runs["last"] = (64, {"grad_sync": "last_micro_batch"})
    for name, (budget, extra) in runs.items():
        cfg = LearnerConfig(lr=1e-3, micro_batch_tokens=budget, grad_clip=100.0, **extra)
        learner = Probe(model, cfg, algo, seed=3)
        metrics = learner.train_step(synthetic_groups(0))
        report[name] = {
            "loss": metrics["loss"],
            "grad_norm": metrics["grad_norm"],
            "micro_batches": learner.micro_batches,
            "sharded_after_non_final": learner.sharded_after_non_final,
        }
        if learner.rank == 0:
            save_file(learner.full_grads, out / f"grads-{name}.safetensors")
        del learner

    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    cfg = LearnerConfig(dtype="bfloat16")
    learner = Learner(tied, cfg, algo, seed=3)
    published = learner.full_state_dict()
    masters = learner.full_state_dict(masters=True)
    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    reference = get_model_state_dict(learner.model, options=opts)
    if learner.rank == 0:
        report["tied_alias"] = (
            published["lm_head.weight"].data_ptr()
            == published["model.embed_tokens.weight"].data_ptr()
        )
        for what, state in (("published", published), ("masters", masters), ("torch", reference)):
            report[f"{what}_dtypes"] = sorted({str(v.dtype) for v in state.values()})
            state = {k: v.clone() for k, v in state.items() if k != "lm_head.weight"}
            save_file(state, out / f"{what}.safetensors")
        report["keys_equal"] = sorted(published) == sorted(reference) == sorted(masters)
    else:
        report["empty_off_rank0"] = published == {} and masters == {}
    rank = learner.rank
    del learner
    close_distributed()
    (out / f"shard{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()

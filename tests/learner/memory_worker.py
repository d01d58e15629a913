"""One learner rank for the learner-memory tests, run as a script with the rendezvous in the env.

    python memory_worker.py MODEL OUT load

`load`: the policy built on the meta device and filled shard by shard (load_sharded_policy)
against the old path (from_pretrained on every rank, then fully_shard): rank 0 writes whether the
full state dicts are equal, every rank whether its rotary buffers equal from_pretrained's and
whether tied weights stayed one tensor, and the first train step's metrics on both paths.
Every rank writes OUT/result{rank}.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

import microcoder.learner.trainer as trainer_module
from microcoder.learner import attention
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.distributed import (
    close_distributed,
    full_state_dict,
    init_distributed,
    load_sharded_policy,
)
from microcoder.learner.trainer import Learner

sys.path.insert(0, str(Path(__file__).parent))
from train_worker import synthetic_groups  # noqa: E402

DEVICE = torch.device("cpu")


def old_load_sharded_policy(path, device, compute_dtype, attn, train=True):
    """The loader as it was before meta-device init: a full fp32 model on every rank."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation=attn
    )
    model.config.use_cache = False
    model.to(device)
    model.train(train)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    names = set(model._no_split_modules)
    for layer in [m for m in model.modules() if type(m).__name__ in names]:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def reference(path: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def step_metrics(model_path: str, old: bool) -> dict:
    cfg, algo = LearnerConfig(lr=1e-3, micro_batch_tokens=96), AlgorithmConfig(mask_prob=0.5)
    trainer_module.load_sharded_policy = old_load_sharded_policy if old else load_sharded_policy
    try:
        learner = Learner(model_path, cfg, algo, seed=3)
        return learner.train_step(synthetic_groups(0))
    finally:
        trainer_module.load_sharded_policy = load_sharded_policy


def check_load(model_path: str, rank: int) -> dict:
    attn = attention.choose("auto", DEVICE)
    model = load_sharded_policy(model_path, DEVICE, torch.float32, attn)
    ref = reference(model_path)
    rotary, ref_rotary = model.model.rotary_emb, ref.model.rotary_emb
    out = {
        "buffers_equal": torch.equal(rotary.inv_freq, ref_rotary.inv_freq)
        and torch.equal(rotary.original_inv_freq, ref_rotary.original_inv_freq),
        "tied": ref.config.tie_word_embeddings,
        "lm_head_is_embedding": model.lm_head.weight is model.model.embed_tokens.weight,
    }
    full = full_state_dict(model)
    if rank == 0:
        want = ref.state_dict()
        out["same_keys"] = sorted(full) == sorted(want)
        out["max_abs_diff"] = max(float((full[k] - want[k]).abs().max()) for k in want if k in full)
    del model
    out["new_step"] = step_metrics(model_path, old=False)
    out["old_step"] = step_metrics(model_path, old=True)
    return out


def main() -> None:
    model_path, out = sys.argv[1], Path(sys.argv[2])
    rank, _ = init_distributed(DEVICE)
    torch.manual_seed(0)
    result = check_load(model_path, rank)
    (out / f"result{rank}.json").write_text(json.dumps(result))
    close_distributed()


if __name__ == "__main__":
    main()

"""One learner rank for the learner-memory tests, run as a script with the rendezvous in the env.

    python memory_worker.py MODEL OUT {load,checkpointing}

`load`: the policy built on the meta device and filled shard by shard (load_sharded_policy)
against the old path (from_pretrained on every rank, then fully_shard): rank 0 writes whether the
full state dicts are equal, every rank whether its rotary buffers equal from_pretrained's and
whether tied weights stayed one tensor, and the first train step's metrics on both paths.
`checkpointing`: one forward/backward without activation checkpointing and with it (switched on
before and after sharding): the loss, the full gradients' largest difference from the run
without, and how often a decoder layer's forward ran.
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
    enable_activation_checkpointing,
    full_state_dict,
    init_distributed,
    load_sharded_policy,
)
from microcoder.learner.trainer import Learner

sys.path.insert(0, str(Path(__file__).parent))
from train_worker import synthetic_groups  # noqa: E402

DEVICE = torch.device("cpu")


def old_load_sharded_policy(
    path,
    device,
    compute_dtype,
    attn,
    replicas=1,
    train=True,
    activation_checkpointing=False,
    offload="none",
    config_overrides=None,
    lora=None,
    seed=0,
):
    """The loader as it was before meta-device init: a full fp32 model on every rank (it had no
    activation checkpointing, HSDP, offload, config overrides nor LoRA; the comparison runs with
    them off)."""
    assert not activation_checkpointing and replicas == 1 and not config_overrides
    assert lora is None
    assert offload == "none"
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
    cfg, algo = LearnerConfig(lr=1e-3, micro_batch_tokens=96), AlgorithmConfig(rho=0.5)
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


def counting(fn, calls: list):
    def wrapped(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return wrapped


def check_checkpointing(model_path: str) -> dict:
    """Loss, full gradients and layer-0 forward count without checkpointing, with it switched on
    before sharding (load_sharded_policy) and after (as LearnerRank does on a built Learner)."""
    attn = attention.choose("auto", DEVICE)
    ids = torch.randint(0, 250, (2, 24), generator=torch.Generator().manual_seed(7))
    results = {}
    for when in ("off", "before", "after"):
        model = load_sharded_policy(
            model_path, DEVICE, torch.float32, attn, activation_checkpointing=when == "before"
        )
        if when == "after":
            enable_activation_checkpointing(model)
        calls, layer = [], model.model.layers[0]
        layer.forward = counting(layer.forward, calls)  # runs again when recomputed in backward
        logits = model(input_ids=ids).logits[:, :-1]
        loss = -torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).mean()
        loss.backward()
        grads = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
        results[when] = {"loss": float(loss), "grads": grads, "layer_forwards": len(calls)}
    grads = {when: r.pop("grads") for when, r in results.items()}
    for when, r in results.items():
        r["grad_names_equal"] = sorted(grads[when]) == sorted(grads["off"])
        r["grad_max_abs_diff"] = max(
            float((grads[when][n] - g).abs().max()) for n, g in grads["off"].items()
        )
    return results


def main() -> None:
    model_path, out, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    rank, _ = init_distributed(DEVICE)
    torch.manual_seed(0)
    result = check_load(model_path, rank) if mode == "load" else check_checkpointing(model_path)
    (out / f"result{rank}.json").write_text(json.dumps(result))
    close_distributed()


if __name__ == "__main__":
    main()

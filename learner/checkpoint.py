"""Checkpoints: a Hugging Face folder users can ship, plus everything needed to resume exactly.

Layout of `step_N/`:
  config.json, model*.safetensors, tokenizer files, generation_config.json
                         loadable by transformers and by vLLM as-is, in the serving dtype (the
                         learner's compute dtype: bf16 on GPU, fp32 on CPU); config.json's
                         `dtype` says which
  optimizer/             torch.distributed.checkpoint (DCP): the fp32 master weights ("model")
                         and the AdamW state ("optimizer"), sharded as saved and resharded on
                         load, so a resume at another learner.world_size is exact too
  rng/rank{r}.safetensors  torch (and CUDA) RNG state of each rank
  trainer_state.json     policy version, scheduler state, seed, world size
  adapter/               under learner.lora only: the adapter in PEFT's format (fp32
                         adapter_model.safetensors, adapter_config.json); the HF files are then
                         the frozen base, and DCP's "model" holds the adapters' masters alone
The truncation-mask draws are seeded from (seed, version), so they need no saved state.
A resume takes the weights from the DCP masters, never from the (possibly bf16) HF files.
Format 1 (before: fp32 masters in the HF files, no "model" in DCP) still loads.
`microcoder export` (learner/export.py) writes a folder in another dtype from the masters.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file, save_file
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from microcoder.learner.lora import adapter_config, adapter_state_dict, write_adapter_folder

if TYPE_CHECKING:
    from microcoder.learner.trainer import Learner

FORMAT_VERSION = 2

ADAPTER_DIR = "adapter"
"""A LoRA checkpoint's adapter folder, inside `step_N/`."""


def save_checkpoint(learner: Learner, path: Path) -> Path:
    """Collective: write the checkpoint folder `path` (created if needed) and return it."""
    from huggingface_hub import save_torch_state_dict

    learner.check_finite(f"saving {path.name}:")  # every rank refuses before anything is written
    path.mkdir(parents=True, exist_ok=True)
    weights = hf_weights(learner)  # the serving dtype: what users ship and serve
    if learner.rank == 0:
        _write_hf_folder(weights, learner.model, learner.model_path, path, learner.dtype)
        save_torch_state_dict(own_storage(weights), path)
    del weights
    save_adapter(learner, path)
    dcp.save(
        {
            "model": masters_state_dict(learner),  # fp32 masters: resume is exact
            "optimizer": get_optimizer_state_dict(learner.model, learner.optimizer),
        },
        checkpoint_id=path / "optimizer",
    )
    (path / "rng").mkdir(exist_ok=True)
    save_file(_rng_state(), path / "rng" / f"rank{learner.rank}.safetensors")
    if learner.rank == 0:
        state = {
            "format_version": FORMAT_VERSION,
            "policy_version": learner.version,
            "scheduler": learner.scheduler.state_dict(),
            "seed": learner.seed,
            "world_size": learner.world,
        }
        (path / "trainer_state.json").write_text(json.dumps(state, indent=1, default=_no_callables))
    dist.barrier()
    return path


def load_training_state(learner: Learner, path: Path) -> None:
    """Collective: restore optimizer, scheduler, version and RNG saved at `path` into `learner`.

    The weights: the fp32 masters saved in DCP (format 2), loaded over those the Learner was
    built with from the HF folder at `path` (which may be bf16).
    """

    state_file = path / "trainer_state.json"
    if not state_file.is_file():
        raise FileNotFoundError(
            f"{path} has no trainer_state.json; it is a model folder, not a learner checkpoint"
        )
    state = json.loads(state_file.read_text())
    fmt = state.get("format_version")
    if fmt not in (1, FORMAT_VERSION):
        raise ValueError(
            f"{path}: checkpoint format {fmt} is not one this microcoder reads (1 or "
            f"{FORMAT_VERSION}); resume it with the microcoder version that wrote it"
        )
    template = {"optimizer": get_optimizer_state_dict(learner.model, learner.optimizer)}
    if fmt >= 2:  # format 1 kept the fp32 masters in the HF files the Learner was built from
        template["model"] = masters_state_dict(learner)
    dcp.load(template, checkpoint_id=path / "optimizer")
    if "model" in template:
        set_model_state_dict(learner.model, template["model"], options=_masters(learner))
    set_optimizer_state_dict(learner.model, learner.optimizer, template["optimizer"])
    sched = dict(state["scheduler"])
    sched.pop("lr_lambdas", None)
    learner.scheduler.load_state_dict({**learner.scheduler.state_dict(), **sched})
    learner.version = int(state["policy_version"])
    rng_file = path / "rng" / f"rank{learner.rank}.safetensors"
    if rng_file.is_file():  # a different world size keeps the fresh per-rank seeds
        rng = load_file(rng_file)
        torch.set_rng_state(rng["torch"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["cuda"])
    dist.barrier()


def hf_weights(learner: Learner) -> dict[str, torch.Tensor]:
    """Collective: the HF files' weights in the serving dtype: the model's, or under
    learner.lora the frozen base's (the adapter goes to `save_adapter`'s folder)."""
    if learner.cfg.lora is not None:
        return learner.base_state_dict()
    return learner.full_state_dict()


def _masters(learner: Learner) -> StateDictOptions:
    """The DCP options of the learner's trained weights: under learner.lora the adapters alone
    (the frozen base is the HF folder's, in the compute dtype it trains in)."""
    lora = learner.cfg.lora is not None
    return StateDictOptions(ignore_frozen_params=lora, strict=not lora)


def masters_state_dict(learner: Learner) -> dict:
    """The sharded fp32 master weights DCP saves and restores: every parameter, or under
    learner.lora only the adapters."""
    return get_model_state_dict(learner.model, options=_masters(learner))


def save_adapter(learner: Learner, path: Path) -> None:
    """Collective, under learner.lora only: the adapter as PEFT saves it, in `path`/adapter
    (adapter_model.safetensors in fp32 + adapter_config.json, learner/lora/adapters.py), loadable with
    `peft.PeftModel.from_pretrained` on the base model and by vLLM as a LoRA adapter."""
    if learner.cfg.lora is None:
        return
    state = adapter_state_dict(learner.model)
    if learner.rank == 0:
        config = adapter_config(learner.cfg.lora, str(learner.model_path.resolve()))
        write_adapter_folder(state, config, path / ADAPTER_DIR)


def _write_hf_folder(
    weights: dict, model: torch.nn.Module, source: Path, path: Path, dtype: torch.dtype
) -> None:
    """config.json (saying `dtype`), generation config and tokenizer next to the weights (rank 0
    only)."""
    from transformers import AutoTokenizer

    config = model.config
    config.use_cache = True
    before = config.dtype
    config.dtype = dtype
    config.save_pretrained(path)
    config.use_cache = False
    config.dtype = before
    if source.resolve() != path.resolve():
        if (source / "generation_config.json").is_file():
            shutil.copy(source / "generation_config.json", path / "generation_config.json")
        AutoTokenizer.from_pretrained(source).save_pretrained(path)
    for old in path.glob("model*.safetensors"):
        old.unlink()
    (path / "model.safetensors.index.json").unlink(missing_ok=True)


def own_storage(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each tensor that is a view of part of a larger storage (MoE experts split from a fused
    tensor: learner/checkpoint_names.py) as a copy of its own, which safetensors can save;
    whole-storage tensors (tied weights under two names) stay shared, and are saved once."""
    return {
        k: t.clone() if t.numel() * t.element_size() != t.untyped_storage().nbytes() else t
        for k, t in state.items()
    }


def _rng_state() -> dict[str, torch.Tensor]:
    out = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state()
    return out


def _no_callables(obj):
    return None

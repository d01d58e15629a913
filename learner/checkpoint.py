"""Checkpoints: a Hugging Face folder plus everything needed to resume exactly.

Layout of `step_N/`:
  config.json, model*.safetensors, tokenizer files, generation_config.json
                         loadable by transformers and by vLLM as-is
  optimizer/             the sharded AdamW state (torch.distributed.checkpoint; reshardable)
  rng/rank{r}.safetensors  torch (and CUDA) RNG state of each rank
  trainer_state.json     policy version, scheduler state, seed, world size
The truncation-mask draws are seeded from (seed, version), so they need no saved state.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from microcoder.learner.trainer import Learner

FORMAT_VERSION = 1


def save_checkpoint(learner: Learner, path: Path) -> Path:
    """Collective: write the checkpoint folder `path` (created if needed) and return it."""
    import torch.distributed.checkpoint as dcp
    from huggingface_hub import save_torch_state_dict
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    path.mkdir(parents=True, exist_ok=True)
    weights = learner.full_state_dict(masters=True)  # fp32: resume continues exactly
    if learner.rank == 0:
        _write_hf_folder(weights, learner.model, learner.model_path, path)
        save_torch_state_dict(weights, path)
    del weights
    dcp.save(
        {"optimizer": get_optimizer_state_dict(learner.model, learner.optimizer)},
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

    The weights come from the HF folder itself (the Learner was built from `path`).
    """
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import (
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )

    state_file = path / "trainer_state.json"
    if not state_file.is_file():
        raise FileNotFoundError(
            f"{path} has no trainer_state.json; it is a model folder, not a learner checkpoint"
        )
    state = json.loads(state_file.read_text())
    if state.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: checkpoint format {state.get('format_version')} != {FORMAT_VERSION}"
        )
    template = {"optimizer": get_optimizer_state_dict(learner.model, learner.optimizer)}
    dcp.load(template, checkpoint_id=path / "optimizer")
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


def _write_hf_folder(weights: dict, model: torch.nn.Module, source: Path, path: Path) -> None:
    """config.json, generation config and tokenizer next to the weights (rank 0 only)."""
    from transformers import AutoTokenizer

    config = model.config
    config.use_cache = True
    config.save_pretrained(path)
    config.use_cache = False
    if source.resolve() != path.resolve():
        if (source / "generation_config.json").is_file():
            shutil.copy(source / "generation_config.json", path / "generation_config.json")
        AutoTokenizer.from_pretrained(source).save_pretrained(path)
    for old in path.glob("model*.safetensors"):
        old.unlink()
    (path / "model.safetensors.index.json").unlink(missing_ok=True)


def _rng_state() -> dict[str, torch.Tensor]:
    out = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state()
    return out


def _no_callables(obj):
    return None

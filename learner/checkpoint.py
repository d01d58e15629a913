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

Saving is asynchronous (`start_save`): the collective part copies everything to host memory
(rank 0's full weights in the serving dtype, each rank's DCP shard staged by `dcp.async_save`,
the HF config, RNG, trainer state) and returns; a background thread per rank writes it, DCP's
collectives on a gloo group of their own so they never interleave with training's. The driver
(launch/run/checkpoint_retention.py) writes into `step_N.partial`, renames it to `step_N` once every
rank's writer is done (`publish_complete`) and writes COMPLETE last, so a kill -9 mid-save leaves
only a `.partial` folder that resume ignores and retention deletes.
Format 1 (before: fp32 masters in the HF files, no "model" in DCP) still loads.
`microcoder export` (learner/export.py) writes a folder in another dtype from the masters.
"""

from __future__ import annotations

import copy
import json
import shutil
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from huggingface_hub import save_torch_state_dict
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
    """Collective: write the checkpoint folder `path` (created if needed) and return it, waiting
    for the writer (`start_save`, then `PendingSave.wait` and a barrier)."""
    path = start_save(learner, path).wait(None)
    dist.barrier()
    return path


class PendingSave:
    """A checkpoint of one rank being written by its background writer (`start_save`). The
    learner trains on meanwhile: what the writer writes was copied to host memory first."""

    def __init__(self, path: Path, thread: threading.Thread, errors: list[BaseException]):
        self.path = path
        self.thread = thread
        self.errors = errors

    def done(self) -> bool:
        return not self.thread.is_alive()

    def wait(self, timeout_s: float | None) -> Path:
        """Block until the writer is done (at most `timeout_s`; None: no limit); re-raises what
        it failed with, TimeoutError if it still writes."""
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            raise TimeoutError(
                f"the checkpoint writer of {self.path} still writes after {timeout_s} s"
            )
        if self.errors:
            raise RuntimeError(f"writing {self.path} failed: {self.errors[0]}") from self.errors[0]
        return self.path


_WRITER_GROUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per Learner: the gloo process group of its checkpoint writers (DCP's collectives from the
writer thread must not interleave with the training loop's on the default group)."""


def start_save(learner: Learner, path: Path) -> PendingSave:
    """Collective: snapshot this rank's checkpoint state to host memory and return while a
    background thread writes it to `path` (created if needed).

    The snapshot: rank 0's full weights in the serving dtype (one host copy, learner.distributed
    .full_state_dict), this rank's shard of the fp32 masters and AdamW state (staged to host
    memory by DCP's own `async_save`, which then writes the shards from its thread), the HF config,
    RNG and trainer state. Nothing the writer reads is the learner's live memory."""
    learner.check_finite(f"saving {path.name}:")  # every rank refuses before anything is written
    path.mkdir(parents=True, exist_ok=True)
    if learner not in _WRITER_GROUPS:
        _WRITER_GROUPS[learner] = dist.new_group(backend="gloo")  # collective: every rank here
    weights = hf_weights(learner)  # a host copy on rank 0 ({} elsewhere): the serving dtype
    save_adapter(learner, path)  # under learner.lora: the small adapter folder, written now
    config = hf_config(learner.model, learner.dtype) if learner.rank == 0 else None
    shards = dcp.async_save(
        {
            "model": masters_state_dict(learner),  # fp32 masters: resume is exact
            "optimizer": get_optimizer_state_dict(learner.model, learner.optimizer),
        },
        checkpoint_id=path / "optimizer",
        process_group=_WRITER_GROUPS[learner],
    )
    rng = _rng_state()
    state = {
        "format_version": FORMAT_VERSION,
        "policy_version": learner.version,
        "scheduler": copy.deepcopy(learner.scheduler.state_dict()),
        "seed": learner.seed,
        "world_size": learner.world,
    }
    errors: list[BaseException] = []

    def write() -> None:
        try:
            if learner.rank == 0:
                _write_hf_folder(config, learner.model_path, path)
                save_torch_state_dict(own_storage(weights), path)
            weights.clear()
            shards.result()
            (path / "rng").mkdir(exist_ok=True)
            save_file(rng, path / "rng" / f"rank{learner.rank}.safetensors")
            if learner.rank == 0:
                text = json.dumps(state, indent=1, default=_no_callables)
                (path / "trainer_state.json").write_text(text)
        except BaseException as err:  # handed to whoever waits (PendingSave.wait)
            errors.append(err)

    thread = threading.Thread(target=write, name=f"checkpoint-writer-{path.name}", daemon=True)
    thread.start()
    return PendingSave(path, thread, errors)


PARTIAL_SUFFIX = ".partial"
"""A checkpoint is written to `step_N.partial`, renamed to `step_N` when every rank's writer is
done, then marked COMPLETE: a folder named step_N without COMPLETE, or any *.partial, is a save
that did not finish (a kill -9 mid-save); resume, eval and retention ignore it, and
launch/run/checkpoint_retention.py deletes it."""


def partial_path(final: Path) -> Path:
    """Where the checkpoint `final` (checkpoints/step_N) is written until it is complete."""
    return final.with_name(final.name + PARTIAL_SUFFIX)


def publish_complete(partial: Path, final: Path, step: int) -> Path:
    """A finished save becomes visible: `partial` renamed to `final` (an older incomplete
    `final` is removed first), then the COMPLETE marker, written last."""
    if (final / "COMPLETE").exists():
        raise FileExistsError(f"{final} is a complete checkpoint already; not replacing it")
    if final.exists():
        shutil.rmtree(final)
    partial.rename(final)
    (final / "COMPLETE").write_text(str(step))
    return final


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


def hf_config(model: torch.nn.Module, dtype: torch.dtype):
    """A copy of the model's config as it is served: cache on, `dtype` the serving dtype (the
    live config stays as training needs it; the writer thread writes the copy)."""
    config = copy.deepcopy(model.config)
    config.use_cache = True
    config.dtype = dtype
    return config


def _write_hf_folder(config, source: Path, path: Path) -> None:
    """config.json (saying its `dtype`), generation config and tokenizer next to the weights
    (rank 0 only)."""
    from transformers import AutoTokenizer

    config.save_pretrained(path)
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

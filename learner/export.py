"""`microcoder export`: a learner checkpoint as a model folder to ship, in the dtype asked for.

The weights come from the fp32 master weights kept in the checkpoint's DCP state (format 2,
learner/checkpoint.py), so a bf16 export is one rounding of the masters and an fp32 export is
exact; a format-1 checkpoint has its masters in the HF files themselves. Everything else a
model folder needs (config.json, tokenizer, generation config) is copied; the training state
(optimizer/, rng/, trainer_state.json, buffer snapshot, ...) is not. Needs no process group.

A LoRA checkpoint (learner.lora: an `adapter/` folder beside the frozen base's HF files) exports
its adapter folder (adapter_model.safetensors in `dtype`, adapter_config.json: PEFT's format,
for `PeftModel.from_pretrained` on the base or vLLM's LoRA), or with `merge` a model folder
whose weights are the base with the adapter folded in (learner/lora/adapters.py: merged_state_dict, in
fp32 from the fp32 adapter and the base as trained, then cast to `dtype`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file

from microcoder.learner.checkpoint import ADAPTER_DIR, own_storage
from microcoder.learner.checkpoint_names import to_checkpoint_names
from microcoder.learner.config import LoraConfig
from microcoder.learner.lora import merged_state_dict, write_adapter_folder

DTYPES = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
    "fp32": torch.float32,
    "float32": torch.float32,
}
"""--dtype names and the torch dtype each writes."""

TRAINING_ONLY = {"trainer_state.json", "COMPLETE", "buffer.snapshot", "temperature.json"}
"""Top-level files of a checkpoint that are training state, not part of the model folder."""


def master_weights(ckpt: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's fp32 master weights, full, on CPU."""

    reader = dcp.FileSystemReader(str(ckpt / "optimizer"))
    meta = reader.read_metadata().state_dict_metadata
    names = [k[len("model.") :] for k in meta if k.startswith("model.")]
    if not names:  # format 1: the HF files hold the masters
        out: dict[str, torch.Tensor] = {}
        for f in sorted(ckpt.glob("model*.safetensors")):
            out |= load_file(f)
        return out
    template = {
        "model": {
            n: torch.empty(meta[f"model.{n}"].size, dtype=meta[f"model.{n}"].properties.dtype)
            for n in names
        }
    }
    dcp.load(template, storage_reader=reader, no_dist=True)
    return _checkpoint_names(ckpt, template["model"])


def _checkpoint_names(ckpt: Path, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The masters are in the model's parameter names (MoE experts fused by transformers 5);
    a shipped folder holds checkpoint names (learner/checkpoint_names.py), as the HF files do."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(ckpt))
    return to_checkpoint_names(model, state)


def export_checkpoint(ckpt: Path, out: Path, dtype: str = "bf16", merge: bool = False) -> Path:
    """Write `out`: a model folder transformers and vLLM load, its weights in `dtype`; from a
    LoRA checkpoint the adapter folder, or with `merge` the merged model folder."""
    lora = (ckpt / ADAPTER_DIR).is_dir()
    if merge and not lora:
        raise ValueError(
            f"{ckpt} is not a LoRA checkpoint (no {ADAPTER_DIR}/ folder): its weights are the "
            "whole model already; export it without --merge"
        )
    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype} is not one of {', '.join(DTYPES)}")
    if not (ckpt / "trainer_state.json").is_file():
        raise FileNotFoundError(
            f"{ckpt} is not a learner checkpoint (no trainer_state.json); pass a run folder "
            "or one of its checkpoints/step_N folders"
        )
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty; choose a new --out")
    if lora and not merge:
        return _export_adapter(ckpt, out, DTYPES[dtype])
    weights = merged_weights(ckpt) if lora else master_weights(ckpt)
    bad = [k for k, t in weights.items() if t.is_floating_point() and not t.isfinite().all()]
    if bad:
        raise ValueError(f"{ckpt}: {bad[0]} holds NaN/Inf; export an earlier checkpoint")
    target = DTYPES[dtype]
    weights = {k: t.to(target) if t.is_floating_point() else t for k, t in weights.items()}
    out.mkdir(parents=True, exist_ok=True)
    for f in ckpt.iterdir():
        weight_file = f.name.startswith("model") and ".safetensors" in f.name
        if f.is_file() and f.name not in TRAINING_ONLY and not weight_file:
            shutil.copy2(f, out / f.name)
    config = json.loads((out / "config.json").read_text())
    config["dtype"] = str(target).removeprefix("torch.")
    config.pop("torch_dtype", None)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    from huggingface_hub import save_torch_state_dict

    save_torch_state_dict(own_storage(weights), out)
    return out


def _adapter(ckpt: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The checkpoint's adapter (fp32, PEFT names) and adapter_config.json."""
    folder = ckpt / ADAPTER_DIR
    config = json.loads((folder / "adapter_config.json").read_text())
    return load_file(folder / "adapter_model.safetensors"), config


def merged_weights(ckpt: Path) -> dict[str, torch.Tensor]:
    """A LoRA checkpoint's base weights (its HF files) with its adapter folded in, in fp32."""
    adapter, config = _adapter(ckpt)
    base: dict[str, torch.Tensor] = {}
    for f in sorted(ckpt.glob("model*.safetensors")):
        base |= load_file(f)
    cfg = LoraConfig(
        rank=config["r"], alpha=config["lora_alpha"], targets=list(config["target_modules"])
    )
    merged = merged_state_dict(base, adapter, cfg)
    return {k: t.float() if t.is_floating_point() else t for k, t in merged.items()}


def _export_adapter(ckpt: Path, out: Path, dtype: torch.dtype) -> Path:
    """The adapter folder of a LoRA checkpoint, its tensors in `dtype`."""
    adapter, config = _adapter(ckpt)
    bad = [k for k, t in adapter.items() if not t.isfinite().all()]
    if bad:
        raise ValueError(f"{ckpt}: {bad[0]} holds NaN/Inf; export an earlier checkpoint")
    return write_adapter_folder({k: t.to(dtype) for k, t in adapter.items()}, config, out)

"""`microcoder export`: a learner checkpoint as a model folder to ship, in the dtype asked for.

The weights come from the fp32 master weights kept in the checkpoint's DCP state (format 2,
learner/checkpoint.py), so a bf16 export is one rounding of the masters and an fp32 export is
exact; a format-1 checkpoint has its masters in the HF files themselves. Everything else a
model folder needs (config.json, tokenizer, generation config) is copied; the training state
(optimizer/, rng/, trainer_state.json, buffer snapshot, ...) is not. Needs no process group.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file

from microcoder.learner.checkpoint import own_storage
from microcoder.learner.checkpoint_names import to_checkpoint_names

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


def export_checkpoint(ckpt: Path, out: Path, dtype: str = "bf16") -> Path:
    """Write `out`: a model folder transformers and vLLM load, its weights in `dtype`."""
    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype} is not one of {', '.join(DTYPES)}")
    if not (ckpt / "trainer_state.json").is_file():
        raise FileNotFoundError(
            f"{ckpt} is not a learner checkpoint (no trainer_state.json); pass a run folder "
            "or one of its checkpoints/step_N folders"
        )
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty; choose a new --out")
    weights = master_weights(ckpt)
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

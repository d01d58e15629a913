"""Make sure the configured model folder exists, building the tiny local model when allowed."""

from __future__ import annotations

from pathlib import Path

from microcoder.launch.config import ModelConfig


def ensure_model(cfg: ModelConfig) -> Path:
    """Return the model folder; build the tiny model there first if it is missing and allowed."""
    from microcoder.learner.tiny_model import build_tiny_model, is_tiny_model_dir

    path = Path(cfg.path)
    if is_tiny_model_dir(path):
        return path
    if not cfg.build_tiny:
        raise FileNotFoundError(
            f"model.path = {path} holds no Hugging Face model (config.json, *.safetensors, tokenizer.json); "
            "point model.path at a model folder, or set model.build_tiny = true to build the tiny one there"
        )
    print(
        f"model: {path} is missing; building the tiny local model (seed {cfg.tiny_seed}) ...",
        flush=True,
    )
    return build_tiny_model(path, seed=cfg.tiny_seed)

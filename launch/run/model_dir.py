"""Make sure the configured model folder exists, building the tiny local model when allowed."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from microcoder.launch.config import Config, ModelConfig
from microcoder.learner.models.tiny_model import build_tiny_model, is_tiny_model_dir
from microcoder.learner.warmstart.build import warm_start, warmstart_corpus


def ensure_model(cfg: ModelConfig, root: Config | None = None) -> Path:
    """Return the model folder; build the tiny model there first if it is missing and allowed
    (warm-started when `model.warmstart`, which is cached: a finished warm start is reused)."""

    path = Path(cfg.path)
    if cfg.warmstart:
        root = root or Config()
        print(f"model: warm start of the tiny model in {path} (cached once done) ...", flush=True)
        res = warm_start(path, seed=cfg.tiny_seed, cfg=root.warmstart, prompt=root.prompt)
        state = "cached" if res.cached else f"done in {res.seconds:.0f} s"
        print(f"model: warm start {state}: step {res.step}, held-out pass rate {res.pass_rate:.3f}")
        return path
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


def load_run_tokenizer(root: Config):
    """The tokenizer of the run's model (what prompts are measured with), without building more
    than needed: the model folder's own tokenizer when it has one; for a warm-started tiny model
    not built yet, the tokenizer its warm start will build (deterministic, seconds; the model is
    built on the first launch); else the tiny model is built as `ensure_model` does."""
    from transformers import AutoTokenizer

    path = Path(root.model.path)
    if (path / "tokenizer.json").is_file() or (path / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(path)
    if root.model.warmstart:
        print(
            f"model: {path} is not built yet; using the tokenizer its warm start will build",
            file=sys.stderr,
            flush=True,
        )
        corpus = warmstart_corpus(root.prompt, root.warmstart.family)
        with tempfile.TemporaryDirectory(prefix="microcoder-tok-") as tmp:
            # built and reloaded as the warm start does: the reload is what the run tokenizes with
            build_tiny_model(tmp, corpus=corpus, vocab_size=root.warmstart.vocab_size)
            return AutoTokenizer.from_pretrained(tmp)
    return AutoTokenizer.from_pretrained(ensure_model(root.model, root))

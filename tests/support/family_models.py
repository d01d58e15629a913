"""Tiny random-weight folders of each supported family (tests/learner/test_families.py, the
`model check` tests): `AutoModelForCausalLM.from_config(...).save_pretrained(dir)`, shapes small
enough for a CPU test, with each family's features biting on the test's 17-23 token sequences
(sliding windows of 8, small soft-caps, weights large enough for the caps to matter).
`tokenizer_model`: the small tiny model the prompt-rendering tests take their tokenizer from."""

from __future__ import annotations

from pathlib import Path

COMMON = dict(
    vocab_size=300,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=256,
    initializer_range=0.1,
    tie_word_embeddings=False,
)
"""Shared shape: head_dim 32 is one vLLM's CPU attention supports (learner/models/families.py)."""

FAMILY_ARCH: dict[str, dict] = {
    "qwen2": {},
    "qwen3": {},
    "llama": dict(
        rope_parameters=dict(
            rope_type="llama3",
            rope_theta=500000.0,
            factor=8.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=16,
        )
    ),
    "mistral": dict(sliding_window=8),
    "gemma2": dict(
        sliding_window=8,
        attn_logit_softcapping=1.0,
        final_logit_softcapping=2.0,
        query_pre_attn_scalar=32,
        tie_word_embeddings=True,
    ),
    "qwen3_moe": dict(
        moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1
    ),
}
"""Per-family config overrides on COMMON."""


def build_family(model_type: str, out: str | Path, seed: int = 0, tokenizer: bool = False) -> Path:
    """Save a random-init tiny `model_type` model (fp32, safetensors) in `out`. With
    `tokenizer`, the folder is a launchable model: a byte-level BPE tokenizer with ChatML specials
    and chat template (learner/models/tiny_model.py's, trained on 20 stdlib files), the vocabulary
    sized to it, and EOS/pad ids in config.json and generation_config.json."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    arch = {**COMMON, **FAMILY_ARCH[model_type]}
    tok = None
    if tokenizer:
        from microcoder.learner.models.tiny_model import stdlib_corpus, train_tokenizer

        tok = train_tokenizer(stdlib_corpus(20), vocab_size=1024)
        ids = dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        arch |= dict(vocab_size=len(tok), bos_token_id=tok.pad_token_id, **ids)
    config = AutoConfig.for_model(model_type, **arch)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if tok is not None:
        model.generation_config = GenerationConfig(**ids)
    model.save_pretrained(out)
    if tok is not None:
        tok.save_pretrained(out)
    return Path(out)


def tokenizer_model(out: str | Path) -> Path:
    """The CPU tests' small model (learner/models/tiny_model.py `SMALL_ARCH`, seed 0) with a
    300-token tokenizer trained on a little Python (`def add`, `class Solution`): what the
    prompt-rendering tests count tokens with (the model itself is idle)."""
    from microcoder.learner.models.tiny_model import SMALL_ARCH, build_tiny_model

    corpus = ["def add(a, b):\n    return a + b\n\nclass Solution:\n    pass\n"] * 20
    return build_tiny_model(out, seed=0, corpus=corpus, vocab_size=300, **SMALL_ARCH)

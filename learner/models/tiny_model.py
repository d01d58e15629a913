"""A tiny Qwen2 policy built locally, with no download: the embedded default's model.

`build_tiny_model(out_dir, seed)` trains a byte-level BPE tokenizer on local text (by default the
Python standard library's own sources, so every machine with Python has the corpus), builds a
small Qwen2 config with random weights from `torch.manual_seed(seed)`, and saves a Hugging Face
folder (safetensors, config, tokenizer, chat template) that loads in transformers and in vLLM.

Deterministic: the same seed and corpus give bit-identical weights and the same tokenizer.
Embeddings are untied, because vLLM's CPU weight reload keeps a stale prepacked copy of a tied
`lm_head` (see docs/vllm-cpu.md §4), and untied costs only vocab × hidden parameters here.
"""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Iterable
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML, as Qwen uses it: the generation prompt ends with "<|im_start|>assistant\n".
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

TINY_ARCH = dict(
    hidden_size=256,
    intermediate_size=688,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
)
"""Shape of the tiny Qwen2 (~3-4 M parameters with a 4k vocabulary)."""

SMALL_ARCH = {**TINY_ARCH, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}
"""A 2-layer toy (~0.1 M parameters with a 300-token vocabulary): `gpu-check --small`'s model and
the CPU tests' small model."""


def stdlib_corpus(max_files: int = 170) -> list[str]:
    """Text of the first `max_files` standard-library .py files, sorted by path (deterministic)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.is_file())[:max_files]
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


def train_tokenizer(corpus: Iterable[str], vocab_size: int = 4096):
    """Byte-level BPE over `corpus`, wrapped as a transformers fast tokenizer with ChatML specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(
    out_dir: str | Path,
    seed: int = 0,
    corpus: Iterable[str] | None = None,
    vocab_size: int = 4096,
    **arch_overrides,
) -> Path:
    """Build the tokenizer and a random-weight Qwen2 for `seed` and save them to `out_dir`."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(stdlib_corpus() if corpus is None else corpus, vocab_size)
    arch = {**TINY_ARCH, **arch_overrides}
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=False,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
        **arch,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "microcoder_tiny.json").write_text(json.dumps({"seed": seed, "arch": arch}, indent=1))
    return out


def is_tiny_model_dir(path: str | Path) -> bool:
    """True when `path` holds a complete saved model (config, weights, tokenizer)."""
    p = Path(path)
    return (
        (p / "config.json").is_file()
        and (p / "tokenizer.json").is_file()
        and any(p.glob("*.safetensors"))
    )

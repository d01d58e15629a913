"""The model families the learner trains correctly, and the checks that refuse the others.

One registry (`FAMILIES`, keyed by config.json's `model_type`) that the launch's pre-start
checks (launch/run/command.py: preflight_errors) and `microcoder model check` consult. A family
is listed only once its learner log-probs are proven equal to transformers' own forward (fp32,
1e-5, packed and chunked, tests/learner/test_families.py) and the names it publishes are the
checkpoint's. Anything else is refused before launch with the reason and what would fix it:
the learner must never train a model silently wrong.

What the learner had to honour for these families: a layer's sliding window and attention
logit soft-cap (learner/attention.py), the model's own final logit processing in the chunked
head (`head_transform`), and transformers' checkpoint-name conversion of fused MoE experts
(learner/checkpoint_names.py). Stdlib only at import: the launch reads config.json with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Family:
    """A supported model family."""

    model_type: str
    """config.json's `model_type`."""
    features: str
    """What about it the learner handles (for `model check` and docs/models.md)."""


FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in [
        Family("qwen2", "dense; optional per-layer sliding window (use_sliding_window)"),
        Family("qwen3", "dense, q/k norm; optional per-layer sliding window"),
        Family("llama", "dense; rope scaling (llama3, linear, dynamic, yarn) via transformers"),
        Family("mistral", "dense; sliding_window on every layer"),
        Family(
            "gemma2",
            "attention logit soft-cap, final logit soft-cap, alternating sliding window, "
            "tied embeddings",
        ),
        Family(
            "qwen3_moe",
            "sparse MoE; fused expert weights loaded from and published in checkpoint names "
            "(no expert parallelism: every rank holds its FSDP shard of every expert)",
        ),
    ]
}
"""The supported families; every one is proven in tests/learner/test_families.py."""

REFUSED: dict[str, str] = {
    "gpt_oss": "its attention sinks (s_aux) are not implemented in the learner's attention",
    "gemma3": "its local/global rope and sliding-window layers are not proven against "
    "transformers in the learner yet",
    "gemma3_text": "its local/global rope and sliding-window layers are not proven against "
    "transformers in the learner yet",
    "phi3": "its sliding window and fused qkv/gate_up weights are not proven yet",
    "granite": "its logits_scaling is applied by the chunked head but the family is not proven yet",
    "cohere": "its logit_scale is applied by the chunked head but the family is not proven yet",
    "mixtral": "its fused experts' checkpoint conversion is not proven yet (qwen3_moe is)",
    "qwen2_moe": "its shared expert and fused experts' conversion are not proven yet "
    "(qwen3_moe is)",
    "deepseek_v3": "MLA attention and its MoE routing are not proven in the learner",
}
"""Known families refused, with why (the reason `family_errors` gives)."""

VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
"""Head sizes vLLM 0.32's CPU attention backend supports (vllm/v1/attention/backends/
cpu_attn.py: CPUAttentionBackend.get_supported_head_sizes)."""

HOW_TO_ADD = (
    "to add a family, prove its learner log-probs and published names with "
    "`microcoder model check DIR` and a test in tests/learner/test_families.py, then list it in "
    "learner/models/families.py (docs/models.md)"
)


def read_config(model_dir: str | Path) -> dict:
    """config.json of a model folder as a dict."""
    return json.loads((Path(model_dir) / "config.json").read_text())


def head_dim(config: dict) -> int:
    """The attention head size: config's `head_dim`, else hidden_size / num_attention_heads."""
    explicit = config.get("head_dim")
    if explicit:
        return int(explicit)
    return int(config["hidden_size"]) // int(config["num_attention_heads"])


def family_errors(config: dict, generator_device: str | None = None) -> list[str]:
    """Why the learner (and, on `generator_device` "cpu", vLLM's CPU attention) cannot run the
    model of this config.json ([] when it can), each naming what would fix it."""
    model_type = str(config.get("model_type", ""))
    errors = []
    if model_type not in FAMILIES:
        why = REFUSED.get(model_type, "it is not among the families proven correct here")
        errors.append(
            f"model_type {model_type!r} is not supported: {why}. Supported: "
            f"{', '.join(sorted(FAMILIES))}; {HOW_TO_ADD}"
        )
    if config.get("attention_sink") or config.get("use_attention_sinks"):
        errors.append(
            "attention sinks are not implemented in the learner's attention; use a model "
            "without them"
        )
    if generator_device == "cpu":
        errors += vllm_cpu_errors(config)
    return errors


VLLM_CPU_MOE_ALIGNMENT = 32
"""vLLM 0.32's CPU MoE experts pad an intermediate size that is not a multiple of this (the
largest of their kinds' output alignments, vllm/model_executor/layers/fused_moe/experts/
cpu_moe.py). The generators' weight reload re-prepacks unpadded layers only
(actors/engines/worker_ext.py: `_mc_prepack_cpu_experts`)."""


def vllm_cpu_errors(config: dict) -> list[str]:
    """Why vLLM's CPU engine cannot serve the model of this config.json, or load new weights
    into it ([] when it can)."""
    if "hidden_size" not in config:
        return []
    errors = []
    size = head_dim(config)
    if size not in VLLM_CPU_HEAD_SIZES:
        errors.append(
            f"head_dim {size} is not supported by vLLM's CPU attention (it supports "
            f"{', '.join(map(str, VLLM_CPU_HEAD_SIZES))}): the generators would restart "
            "forever; choose a model whose head_dim (or hidden_size / num_attention_heads) "
            'is one of those, or set cluster.device = "cuda"'
        )
    moe = config.get("moe_intermediate_size")
    if moe and int(moe) % VLLM_CPU_MOE_ALIGNMENT:
        errors.append(
            f"moe_intermediate_size {moe} is not a multiple of {VLLM_CPU_MOE_ALIGNMENT}: vLLM's "
            "CPU experts pad such a layer, and loading new weights into a padded layer is not "
            "supported here (the generators would sample from scrambled experts); choose a "
            'model whose moe_intermediate_size is a multiple of 32, or set cluster.device = "cuda"'
        )
    if config.get("model_type") == "gemma2":
        errors.append(
            "gemma2 on vLLM's CPU engine samples other tokens than the learner's model (`model "
            "check`'s vLLM stage: greedy differs from transformers' after the weight load, "
            "2026-12-03, docs/models.md), so the run would train off-policy without knowing it; "
            'set cluster.device = "cuda" and check the folder with `microcoder model check` '
            "there first"
        )
    return errors


LORA_FAMILIES = ("qwen2", "qwen3", "llama", "mistral", "gemma2", "qwen3_moe")
"""Families whose vLLM 0.32 model serves LoRA adapters (SupportsLoRA in
vllm/model_executor/models/), on their dense projections."""

EXPERT_TARGETS = ("gate_proj", "up_proj", "down_proj")
"""LoRA targets that are a mixture-of-experts layer's experts (learner.lora.targets)."""


def is_moe(config: dict) -> bool:
    """Whether config.json describes mixture-of-experts layers."""
    return any(int(config.get(k) or 0) > 0 for k in ("num_experts", "num_local_experts"))


def lora_errors(config: dict, targets: list[str]) -> list[str]:
    """Why learner.lora with `targets` cannot be trained here and served by vLLM as an adapter
    on the model of this config.json ([] when it can)."""
    model_type = str(config.get("model_type", ""))
    if model_type not in LORA_FAMILIES:
        return [
            f"learner.lora on model_type {model_type!r}: its adapters are not proven to be served "
            f"by vLLM here (LoRA families: {', '.join(LORA_FAMILIES)}); train it without "
            "learner.lora"
        ]
    experts = [t for t in targets if t in EXPERT_TARGETS]
    if not (is_moe(config) and experts):
        return []
    return [
        f"learner.lora.targets {experts} on {model_type}: these are the experts of its MoE "
        "layers, which transformers holds fused as 3-D tensors that peft's target_modules do "
        "not adapt, and vLLM 0.32 serves expert adapters only on GPU (its CPU LoRA, "
        "PunicaWrapperCPU, has no fused-MoE path); set learner.lora.targets = "
        '["q_proj", "k_proj", "v_proj", "o_proj"] (the attention projections)'
    ]


def model_dir_errors(
    model_dir: str | Path,
    generator_device: str | None = None,
    lora_targets: list[str] | None = None,
) -> list[str]:
    """family_errors of the folder's config.json (and, with `lora_targets` = learner.lora.targets,
    lora_errors); [] when the folder has none yet (the tiny model, a qwen2, is built at launch:
    launch/run/model_dir.py)."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        return []
    try:
        config = read_config(model_dir)
    except (OSError, ValueError) as err:
        return [f"{path} is not readable JSON ({err}); fix or replace the model folder"]
    errors = family_errors(config, generator_device)
    if lora_targets is not None:
        errors += lora_errors(config, lora_targets)
    return [f"model {model_dir}: {e}" for e in errors]


def head_transform(config) -> tuple[float, float | None]:
    """(scale, softcap) of the model's own processing of the head's output, as its forward
    applies it (grpo.final_logits): Cohere's `logit_scale`, 1 / Granite's `logits_scaling`,
    Gemma-2's `final_logit_softcapping`. `config` is a transformers config (or a dict)."""
    get = config.get if isinstance(config, dict) else lambda k: getattr(config, k, None)
    scale = 1.0
    if get("logit_scale") is not None:
        scale *= float(get("logit_scale"))
    if get("logits_scaling") is not None:
        scale /= float(get("logits_scaling"))
    softcap = get("final_logit_softcapping")
    return scale, (float(softcap) if softcap else None)

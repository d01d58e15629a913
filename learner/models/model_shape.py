"""The shape of a decoder-only transformer, counted from its config.json alone.

Pure python (standard library only), like learner/models/memory_plan.py, which plans memory from
it. `ModelShape.from_config` reads the fields the memory depends on, for every family the learner
supports (learner/models/families.py: qwen2, qwen3, llama, mistral, gemma2, qwen3_moe) and the
common others with the same layout: mixture-of-experts layers (routed experts, shared experts and
their gate, the router, dense layers among sparse ones), tied embeddings, an explicit head_dim,
Gemma's extra norms and q/k norms, plain (non-gated) MLPs with biases, and a multimodal config's
`text_config`. Each count is checked against transformers built on the meta device
(tests/gpu_path/test_model_shape.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

QWEN2_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
)
"""The config.json fields of a Qwen2 shape, in the order of QWEN25_SHAPES' rows."""

QWEN25_SHAPES = {
    # name: hidden, intermediate, layers, heads, kv heads, vocab, tied embeddings
    "0.5b": (896, 4864, 24, 14, 2, 151936, True),
    "1.5b": (1536, 8960, 28, 12, 2, 151936, True),
    "7b": (3584, 18944, 28, 28, 4, 152064, False),
}
"""Public Qwen2.5(-Coder) shapes (config.json numbers): the benches', gpu-check's and the tests'
reference models, built with random weights."""

FOUR_NORMS = ("gemma2", "gemma3", "gemma3_text")
"""Families with four RMSNorms per layer (before and after attention and the MLP)."""

QK_NORM = ("qwen3", "qwen3_moe", "gemma3", "gemma3_text")
"""Families with a per-head RMSNorm on q and k (head_dim wide)."""

QKV_BIAS = ("qwen2", "qwen2_moe")
"""Families whose q/k/v projections have a bias unless config.json says otherwise."""

MLA_FIELDS = (
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
)
"""The config.json fields of multi-head latent attention, in ModelShape.mla's order."""

PLAIN_MLP = ("starcoder2", "gpt_bigcode", "gpt2", "gpt_neox")
"""Families with a two-matrix MLP (up, act, down) instead of the gated three."""


def qwen25_shape(name: str) -> dict:
    """The config.json fields (QWEN2_FIELDS) of the public Qwen2.5 model `name` (QWEN25_SHAPES)."""
    return dict(zip(QWEN2_FIELDS, QWEN25_SHAPES[name], strict=True))


class ShapeError(ValueError):
    """config.json is missing or does not describe a decoder-only transformer we can count."""


def _text(cfg: dict) -> dict:
    """The language model's fields: a multimodal config.json nests them under text_config."""
    inner = cfg.get("text_config")
    if isinstance(inner, dict) and "hidden_size" in inner:
        return {"model_type": cfg.get("model_type", ""), **inner}
    return cfg


def _moe_layers(cfg: dict, layers: int) -> int:
    """How many decoder layers are sparse (mixture of experts) in a config with experts."""
    dense = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or 1)
    first_dense = int(cfg.get("first_k_dense_replace") or 0)
    return sum(
        1 for i in range(layers) if i not in dense and (i + 1) % step == 0 and i >= first_dense
    )


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer that its memory depends on."""

    hidden: int
    """Hidden size H."""
    layers: int
    """Decoder layers."""
    heads: int
    """Attention (query) heads."""
    kv_heads: int
    """Key/value heads (GQA)."""
    head_dim: int
    """Per-head width."""
    intermediate: int
    """Dense MLP width I (gate, up: H -> I; down: I -> H)."""
    vocab: int
    """Vocabulary size V."""
    tied: bool
    """LM head shares the embedding matrix."""
    qkv_bias: bool = True
    """q/k/v projections have a bias (Qwen2 yes, Qwen3 and Llama no)."""
    qk_norm: bool = False
    """Per-head RMSNorm on q and k (Qwen3, Gemma-3)."""
    o_bias: bool = False
    """The attention output projection has a bias (Llama-style attention_bias = true)."""
    mlp_bias: bool = False
    """The MLP's projections have biases."""
    gated_mlp: bool = True
    """gate and up projections (SwiGLU); False = one up projection (GELU MLP)."""
    layer_norms: int = 2
    """Norms of width H per decoder layer (Gemma-2/3: four)."""
    norm_bias: bool = False
    """The norms are LayerNorms with a bias."""
    experts: int = 0
    """Routed experts per sparse layer (0 = a dense model)."""
    experts_per_token: int = 0
    """Experts each token is routed to (top-k)."""
    expert_intermediate: int = 0
    """One routed expert's MLP width."""
    shared_intermediate: int = 0
    """Total MLP width of the shared experts every token runs (0 = none)."""
    shared_gate: bool = False
    """A [1, H] sigmoid gate on the shared expert's output (Qwen2-MoE)."""
    moe_layers: int = 0
    """Decoder layers that are sparse; the others have the dense MLP."""
    sliding_window: int = 0
    """Window of the layers that use one (0 = none)."""
    window_layers: int = 0
    """Decoder layers that use the sliding window."""
    attn_softcap: float = 0.0
    """Attention logit soft-cap of every layer (Gemma-2; 0 = none)."""
    mla: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    """Multi-head latent attention (DeepSeek-V2/V3): q_lora_rank, kv_lora_rank, qk_nope_head_dim,
    qk_rope_head_dim, v_head_dim; all 0 = ordinary q/k/v projections."""
    router_bias: bool = False
    """The router has a per-expert score correction bias (DeepSeek-V3)."""

    @classmethod
    def from_config(cls, cfg: dict) -> ModelShape:
        """From a Hugging Face config.json's fields (see the module docstring for the families)."""
        cfg = _text(cfg)
        need = ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"]
        if "intermediate_size" not in cfg and "moe_intermediate_size" not in cfg:
            need.append("intermediate_size")
        missing = [k for k in need if k not in cfg]
        if missing:
            raise ShapeError(
                f"config.json has no {', '.join(missing)}: the memory plan counts decoder-only "
                "transformers (Qwen2, Qwen3, Llama, Mistral, Gemma-2, Qwen3-MoE and alike); "
                "pass the model's own config.json"
            )
        kind = str(cfg.get("model_type", ""))
        hidden = int(cfg["hidden_size"])
        layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        experts = int(
            cfg.get("num_experts")
            or cfg.get("num_local_experts")
            or cfg.get("n_routed_experts")
            or 0
        )
        dense_width = int(cfg.get("intermediate_size") or cfg.get("moe_intermediate_size"))
        expert_width = int(cfg.get("moe_intermediate_size") or dense_width) if experts else 0
        shared = int(cfg.get("shared_expert_intermediate_size") or 0)
        shared += int(cfg.get("n_shared_experts") or 0) * expert_width
        bias = cfg.get("attention_bias", cfg.get("use_bias"))
        window = cfg.get("sliding_window") or 0
        if kind in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and not cfg.get(
            "use_sliding_window"
        ):
            window = 0
        window_layers = 0
        if window:
            types = cfg.get("layer_types")
            if isinstance(types, list):
                window_layers = sum(1 for t in types if "sliding" in str(t))
            elif kind in FOUR_NORMS:
                window_layers = (layers + 1) // 2  # alternating, the first one windowed
            elif kind.startswith("qwen"):
                window_layers = max(0, layers - int(cfg.get("max_window_layers") or 0))
            else:
                window_layers = layers
        moe_layers = _moe_layers(cfg, layers) if experts else 0
        mla0 = (0, 0, 0, 0, 0)
        return cls(
            hidden=hidden,
            layers=layers,
            heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            intermediate=dense_width,
            vocab=int(cfg["vocab_size"]),
            tied=bool(cfg.get("tie_word_embeddings", kind in FOUR_NORMS or kind == "gemma")),
            qkv_bias=bool(bias if bias is not None else kind in QKV_BIAS),
            qk_norm=kind in QK_NORM,
            o_bias=bool(bias) and kind not in QKV_BIAS,
            mlp_bias=bool(cfg.get("mlp_bias", cfg.get("use_bias", False))),
            gated_mlp=kind not in PLAIN_MLP,
            layer_norms=4 if kind in FOUR_NORMS else 2,
            norm_bias=kind in PLAIN_MLP,
            experts=experts,
            experts_per_token=int(cfg.get("num_experts_per_tok") or 0) if experts else 0,
            expert_intermediate=expert_width,
            shared_intermediate=shared if experts else 0,
            shared_gate=bool(cfg.get("shared_expert_intermediate_size")) and experts > 0,
            moe_layers=moe_layers,
            sliding_window=int(window) if window_layers else 0,
            window_layers=window_layers,
            attn_softcap=float(cfg.get("attn_logit_softcapping") or 0.0),
            mla=tuple(int(cfg.get(k) or 0) for k in MLA_FIELDS) if "kv_lora_rank" in cfg else mla0,
            router_bias=experts > 0 and cfg.get("topk_method") == "noaux_tc",
        )

    @classmethod
    def from_folder(cls, folder: str | Path, overrides: dict | None = None) -> ModelShape:
        """From `folder`/config.json with `overrides` (model.config_overrides: each key replaces
        config.json's); no weights are read."""
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise ShapeError(
                f"{path} does not exist: the memory plan needs only the model's config.json; put "
                f"the model folder at {folder}, or just its config.json (e.g. from the model's "
                "Hub page: Files > config.json) to plan before downloading the weights"
            )
        return cls.from_config({**json.loads(path.read_text()), **(overrides or {})})

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def dense_layers(self) -> int:
        """Decoder layers with the dense MLP."""
        return self.layers - self.moe_layers

    def _mlp(self, width: int) -> int:
        h = self.hidden
        mats = 3 if self.gated_mlp else 2
        return mats * h * width + ((mats - 1) * width + h if self.mlp_bias else 0)

    def attention_params(self) -> int:
        """One layer's attention and norms."""
        h = self.hidden
        q = self.q_width
        kv = self.kv_width
        attn = h * q + 2 * h * kv + q * h
        attn += (q + 2 * kv if self.qkv_bias else 0) + (h if self.o_bias else 0)
        if any(self.mla):
            q_rank, kv_rank, nope, rope, v = self.mla
            qk = self.heads * (nope + rope)
            attn = q_rank * (h + 1) + q_rank * qk if q_rank else h * qk
            attn += h * (kv_rank + rope) + kv_rank + kv_rank * self.heads * (nope + v)
            attn += self.heads * v * h
        norms = self.layer_norms * h * (2 if self.norm_bias else 1)
        return attn + norms + (2 * self.head_dim if self.qk_norm else 0)

    def expert_params(self) -> int:
        """One sparse layer's routed experts (all of them)."""
        return self.experts * self._mlp(self.expert_intermediate) if self.experts else 0

    def moe_layer_params(self) -> int:
        """One sparse layer: attention, the experts, the router and the shared experts."""
        shared = self._mlp(self.shared_intermediate) if self.shared_intermediate else 0
        router = self.experts * (self.hidden + self.router_bias)
        router += self.hidden if self.shared_gate else 0
        return self.attention_params() + self.expert_params() + router + shared

    def dense_layer_params(self) -> int:
        """One dense layer: attention and the MLP."""
        return self.attention_params() + self._mlp(self.intermediate)

    def layer_params(self) -> int:
        """Parameters of the largest decoder layer (what one unsharded layer holds)."""
        if self.moe_layers:
            return max(self.moe_layer_params(), self.dense_layer_params() * bool(self.dense_layers))
        return self.dense_layer_params()

    def root_params(self) -> int:
        """Parameters outside the decoder layers: embeddings, final norm, untied head."""
        final_norm = self.hidden * (2 if self.norm_bias else 1)
        return self.vocab * self.hidden * (1 if self.tied else 2) + final_norm

    def layers_params(self) -> int:
        """Parameters of every decoder layer."""
        dense = self.dense_layers * self.dense_layer_params()
        return dense + self.moe_layers * self.moe_layer_params()

    def params(self) -> int:
        return self.layers_params() + self.root_params()

    def active_params(self) -> int:
        """Parameters one token runs through (the routed experts it is sent to only)."""
        idle = self.experts - self.experts_per_token
        return self.params() - self.moe_layers * idle * self._mlp(self.expert_intermediate)

"""`model.config_overrides`: one set of model-config changes for the learner, the generators and
`model check`, so the sampler and the learner score tokens under the same model.

The typical override is the RoPE of a long context (`rope_scaling`, `rope_theta`,
`max_position_embeddings`). transformers 5 keeps every RoPE setting in one `rope_parameters`
dict (rope_type, factor, ..., rope_theta), and both it and vLLM 0.32 *replace* that dict when a
legacy `rope_scaling` is set, silently dropping the model's own rope_theta (vLLM then uses
10,000). So the overrides are resolved here, once, to a complete `rope_parameters`:

- `rope_scaling` / `rope_parameters`: the new scaling; the model's rope_theta is kept unless the
  override names one;
- `rope_theta`: the theta alone, the scaling kept;
- any other key: replaces config.json's value as it is.

`model_config(path, overrides)` is the transformers config the learner builds (and the shipped
checkpoint's config.json, which then carries the overrides); `vllm_hf_overrides` is what the
generators give vLLM's `hf_overrides` for the same result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROPE_KEYS = ("rope_scaling", "rope_parameters", "rope_theta")
"""Override keys resolved into one complete `rope_parameters` dict."""

GENERATOR_ONLY_KEYS = ROPE_KEYS + ("max_position_embeddings",)
"""The keys whose use in `generator.engine_args.hf_overrides` alone is a RoPE mismatch
(launch/config.py refuses every key there that model.config_overrides does not match)."""


def _base_config(path: str | Path):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(path)


def resolved_rope(current: dict | None, overrides: dict[str, Any]) -> dict | None:
    """The complete `rope_parameters` after `overrides` (None when they name no RoPE key)."""
    if not any(k in overrides for k in ROPE_KEYS):
        return None
    current = dict(current or {})
    if any(isinstance(v, dict) for v in current.values()):
        raise ValueError(
            "model.config_overrides: this model has per-layer-type rope_parameters; override "
            "rope_parameters with the whole per-layer dict in config.json instead"
        )
    rope = current
    for key in ("rope_scaling", "rope_parameters"):
        if key in overrides:
            new = overrides[key]
            if not isinstance(new, dict):
                raise ValueError(
                    f"model.config_overrides.{key} must be a table, e.g. "
                    '{rope_type = "linear", factor = 4.0}'
                )
            rope = {"rope_theta": current.get("rope_theta"), **new}
    if "rope_theta" in overrides:
        rope["rope_theta"] = float(overrides["rope_theta"])
    if rope.get("rope_theta") is None:
        rope.pop("rope_theta", None)
    return rope


def model_config(path: str | Path, overrides: dict[str, Any] | None = None):
    """The transformers config of the model folder `path` with `overrides` applied (module
    docstring); the plain `AutoConfig.from_pretrained(path)` when there are none."""
    base = _base_config(path)
    if not overrides:
        return base
    raw = json.loads((Path(path) / "config.json").read_text())
    plain = {k: v for k, v in overrides.items() if k not in ROPE_KEYS}
    merged = {**raw, **plain}
    rope = resolved_rope(getattr(base, "rope_parameters", None), overrides)
    if rope is not None:
        merged.pop("rope_scaling", None)
        merged.pop("rope_theta", None)
        merged["rope_parameters"] = rope
    config = type(base).from_dict(merged)
    config._name_or_path = base._name_or_path
    return config


def vllm_hf_overrides(path: str | Path, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """vLLM's `hf_overrides` that give the generators' engine the config `model_config` gives
    the learner: the plain keys as they are, the RoPE keys as the complete `rope_parameters`
    (vLLM sets a dict-valued override on the loaded config as it is)."""
    if not overrides:
        return {}
    out = {k: v for k, v in overrides.items() if k not in ROPE_KEYS}
    if any(k in overrides for k in ROPE_KEYS):
        out["rope_parameters"] = dict(model_config(path, overrides).rope_parameters)
    return out


def overrides_dict(config: dict, overrides: dict[str, Any] | None) -> dict:
    """config.json's dict with the plain overrides applied (for the stdlib checks that read
    config.json: families, memory plan); RoPE keys are left to `model_config`."""
    return {**config, **{k: v for k, v in (overrides or {}).items() if k not in ROPE_KEYS}}


def generator_only_problems(engine_args: dict[str, Any], overrides: dict[str, Any]) -> list[str]:
    """One line per key of `generator.engine_args.hf_overrides` that model.config_overrides does
    not give the same value: the generators would sample from another model config than the
    learner scores with (a RoPE override past the original window: other log-probs for the
    same tokens, and nothing would say so). No key is safe to keep there alone: a key the model
    reads changes one side's math, and one it does not read costs nothing in
    model.config_overrides, which reaches both sides."""
    if "hf_overrides" not in engine_args:
        return []
    hf = engine_args["hf_overrides"]
    if not isinstance(hf, dict):
        return [
            "generator.engine_args.hf_overrides must be a table; put model config changes in "
            "model.config_overrides instead (the learner and the generators both apply them)"
        ]
    problems = []
    for key, value in hf.items():
        if key in overrides and overrides[key] == value:
            continue
        kind = "a RoPE setting" if key in GENERATOR_ONLY_KEYS else "a model config key"
        problems.append(
            f"generator.engine_args.hf_overrides.{key} is {kind} given to the generators "
            "alone: the learner would score tokens under another config than vLLM samples "
            f"them with (for RoPE: other positions past the original window); set "
            f"model.config_overrides.{key} = {json.dumps(value)} instead (it reaches the "
            "learner, the generators and `model check`) and remove it from hf_overrides"
        )
    return problems

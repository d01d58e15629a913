"""Algorithm presets (`algorithm.preset`): GRPO, DAPO, microcoder's MicroCoder-GRPO and the
paper's own runs as sets of values.

Registered once, in PRESETS: name -> Preset(description, values), the values keyed by
AlgorithmConfig field names (`temperature` holds a dict of TemperatureConfig fields). Layering is
defaults < preset < TOML / --set: a preset fills only the fields the user did not set
(`apply_preset`, called by AlgorithmConfig's before-validator), and records what it filled in
`algorithm.preset_values` (dotted keys), so the resolved config (`microcoder config show`, the
run's config.toml) names the preset and every value it set. docs/architecture.md §5 has the table;
docs/fidelity.md says where each value comes from (the paper, DAPO, or microcoder's own choice).

No torch here: this runs at config-load time.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

_FIXED_TEMPERATURE: dict[str, Any] = {"calibrate": False, "monitor_window": 0, "schedule": []}
"""Sampling at temperature.initial throughout: no calibration, no monitor, no staged schedule."""


@dataclass(frozen=True)
class Preset:
    """One algorithm preset: what it reproduces, and the AlgorithmConfig values it sets."""

    description: str
    """One line: the algorithm and where its values come from."""
    values: dict[str, Any]
    """AlgorithmConfig field -> value; `temperature` -> {TemperatureConfig field: value}."""


PRESETS: dict[str, Preset] = {
    "grpo": Preset(
        "GRPO (DeepSeekMath): symmetric clip 0.2, k3 KL at 0.001 (verl's GRPO example scripts: "
        "kl_loss_coef=0.001, kl_loss_type=low_var_kl; DeepSeekMath used 0.04), per-sequence "
        "mean, no dynamic filtering, no truncation mask, fixed temperature",
        {
            "eps_low": 0.2,
            "eps_high": 0.2,
            "kl_coef": 0.001,
            "aggregation": "seq-mean-token-mean",
            "dynamic_filtering": False,
            "truncation_mask": "none",
            "overlong_buffer_tokens": 0,
            "temperature": dict(_FIXED_TEMPERATURE),
        },
    ),
    "dapo": Preset(
        "DAPO (arXiv 2503.14476): clip-higher 0.2/0.28, no KL, token-level loss, dynamic "
        "sampling, overlong filtering (every truncated response masked), fixed temperature; "
        "the soft overlong punishment is the option algorithm.overlong_buffer_tokens",
        {
            "eps_low": 0.2,
            "eps_high": 0.28,
            "kl_coef": 0.0,
            "aggregation": "token-mean",
            "dynamic_filtering": True,
            "truncation_mask": "all",
            "overlong_buffer_tokens": 0,
            "temperature": dict(_FIXED_TEMPERATURE),
        },
    ),
    "microcoder": Preset(
        "MicroCoder-GRPO (arXiv 2603.07777) with microcoder's own choices: no KL, clip-higher "
        "0.2/0.28 (DAPO's values), token-level loss, dynamic filtering (DAPO's; not in the "
        "paper's equation), conditional truncation mask (rho 0.1, m 128), the diversity-determined "
        "temperature (calibrated before step 1; an online monitor stepping T up once at most; ours)",
        {
            "eps_low": 0.2,
            "eps_high": 0.28,
            "kl_coef": 0.0,
            "aggregation": "token-mean",
            "dynamic_filtering": True,
            "truncation_mask": "conditional",
            "rho": 0.1,
            "repeat_window": 128,
            "overlong_buffer_tokens": 0,
            "temperature": {
                "calibrate": True,
                "monitor_window": "auto",
                "monitor_max_changes": 1,
            },
        },
    ),
    "paper": Preset(
        "the paper's main runs (arXiv 2603.07777) as far as it states them: the MicroCoder-GRPO "
        "objective (no KL, clip-higher, conditional truncation mask rho 0.1, m 128), no dynamic "
        "filtering, a fixed T = 1.2 (no calibration, no monitor); what it does not state is "
        "microcoder's (docs/fidelity.md)",
        {
            "eps_low": 0.2,
            "eps_high": 0.28,
            "kl_coef": 0.0,
            "aggregation": "token-mean",
            "dynamic_filtering": False,
            "truncation_mask": "conditional",
            "rho": 0.1,
            "repeat_window": 128,
            "overlong_buffer_tokens": 0,
            "temperature": {**_FIXED_TEMPERATURE, "initial": 1.2},
        },
    ),
}
"""The algorithm presets, name -> Preset. The microcoder monitor: window "auto" (a tenth of
max_steps, at least 5: long enough that one noisy batch's diversity does not move T, 5 steps in
the toy recipes, 50 in a 500-step run) and one step-up per run, so a slow decay of diversity
over a long run gives one stage, not a ramp up the ladder (docs/architecture.md §5)."""


def flat_values(name: str) -> dict[str, Any]:
    """The preset's values with dotted keys (`temperature.calibrate`), as preset_values holds them."""
    flat: dict[str, Any] = {}
    for key, value in PRESETS[name].values.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[key] = value
    return flat


def check_name(name: str) -> None:
    """Raise ValueError naming the nearest preset when `name` is not registered ("" = none)."""
    if name == "" or name in PRESETS:
        return
    close = difflib.get_close_matches(name, list(PRESETS), n=1, cutoff=0.0)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise ValueError(
        f"unknown algorithm.preset '{name}'; {hint}set it to one of {sorted(PRESETS)} "
        "(or leave it empty for the field defaults)"
    )


_UNSET = object()
"""What `_current` returns for a key the config does not set."""


def _as_dict(section: Any, every_field: bool = False) -> dict[str, Any]:
    """The keys of a sub-section given as a dict or as a model (a model: the fields set on it,
    or with `every_field` all of them)."""
    if isinstance(section, BaseModel):
        return section.model_dump(exclude_unset=not every_field)
    return dict(section)


def _current(data: dict[str, Any], dotted: str, every_field: bool) -> Any:
    """The value `data` gives the dotted key, or _UNSET when it gives none."""
    head, _, sub = dotted.partition(".")
    if not sub:
        return data.get(head, _UNSET)
    section = data.get(head)
    return _UNSET if section is None else _as_dict(section, every_field).get(sub, _UNSET)


def apply_preset(data: dict[str, Any], complete: bool = False) -> dict[str, Any]:
    """The AlgorithmConfig input with the preset's values filled where the user set none.

    `complete`: `data` names every field (a resolved config read back, or pydantic's check of
    an assignment, which passes the whole model): then the preset fills nothing.

    Returns a new dict whose `preset_values` holds every value the preset set (dotted keys).
    A `preset_values` already in `data` (a resolved config read back, e.g. on resume) must be
    the preset's own values; its entries stay recorded while the field still has that value,
    so writing and reading a resolved config gives the same config.
    """
    name = str(data.get("preset") or "")
    check_name(name)
    given = dict(data.get("preset_values") or {})
    if not name:
        if given:
            raise ValueError(
                "algorithm.preset_values is recorded from algorithm.preset, which is empty; "
                "delete preset_values (or set algorithm.preset)"
            )
        return data
    preset = flat_values(name)
    for key, value in given.items():
        if key not in preset or preset[key] != value:
            raise ValueError(
                f"algorithm.preset_values['{key}'] = {value!r} is not what preset '{name}' sets; "
                "preset_values is recorded by the config loader: delete it from the config"
            )
    out = dict(data)
    temperature: dict[str, Any] = {}
    recorded: dict[str, Any] = {}
    for key, value in preset.items():
        current = _current(out, key, complete)
        if current is _UNSET and not complete:
            head, _, sub = key.partition(".")
            if sub:
                temperature[sub] = value
            else:
                out[head] = value
            recorded[key] = value
        elif key in given and current == value:
            recorded[key] = value
    if temperature:  # only then: on assignment pydantic keeps what this returns, unvalidated
        out["temperature"] = {**_as_dict(out.get("temperature") or {}), **temperature}
    out["preset_values"] = recorded
    return out


def overridden(algo: Any) -> dict[str, tuple[Any, Any]]:
    """The preset's fields the config set to another value: dotted key -> (preset's, config's).

    `algo` is a resolved AlgorithmConfig. A recipe that pins such a field (e.g. tiny-cpu.toml's
    `temperature.calibrate = true` under the `grpo` preset) beats the preset, by the layering;
    `microcoder config show` and `compare` say so.
    """
    if not algo.preset:
        return {}
    out = {}
    for key, value in flat_values(algo.preset).items():
        head, _, sub = key.partition(".")
        current = getattr(getattr(algo, head), sub) if sub else getattr(algo, head)
        if current != value:
            out[key] = (value, current)
    return out


def describe_overrides(algo: Any) -> str:
    """One line naming what the config overrode of its preset ("" when nothing)."""
    pairs = overridden(algo)
    if not pairs:
        return ""
    listed = ", ".join(f"{k} = {c!r} (preset {p!r})" for k, (p, c) in pairs.items())
    return f"algorithm.preset '{algo.preset}': the config overrides {listed}"

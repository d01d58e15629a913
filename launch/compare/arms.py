"""The arms `microcoder compare` can run, registered once: each is a name, what it changes, and
the `--set` overrides that make it.

Five kinds of name:
- a preset of learner/algorithm/presets.py (`grpo`, `dapo`, `microcoder`, `paper`): `algorithm.preset=NAME`;
- a named override set of NAMED_ARMS (`no-mask`, `mask-all`, `mask-cond`, `clip-sym`, ...);
- a valued arm of VALUED_ARMS, `PREFIX=NUMBER` (`T=0.6`, `kl=0.001`, `rho=0.3`);
- a choice arm of CHOICE_ARMS, `PREFIX=CHOICE`, the choices being a registry of the learner
  (`off_policy=tis`, `off_policy=mask`: learner/algorithm/off_policy.py: OFF_POLICY;
  `policy_loss=gspo`, `policy_loss=cispo`: learner/algorithm/policy_loss.py: POLICY_LOSSES);
- a custom arm `NAME:KEY=VALUE;KEY=VALUE` (any config keys, e.g. `lr2:learner.lr=2e-4`).

`parse_arms("grpo,no-mask,T=0.6")` turns a comma list into Arms or raises ArmError naming the
nearest valid name and listing every one.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tomli_w


class ArmError(ValueError):
    """An arm name that is not registered, malformed, or given twice; the message says the fix."""


@dataclass(frozen=True)
class Arm:
    """One arm of a comparison: a name (also its folder under --out) and its config overrides."""

    name: str
    """As given on the command line; the arm's folder is OUT/<name>/."""
    description: str
    """What the arm changes, in words (the report's arm list)."""
    overrides: tuple[str, ...]
    """`KEY=VALUE` overrides applied over the recipe (the command's own --set come after)."""
    preset: str = ""
    """The algorithm preset the arm runs ("" for none): see `resolve_overrides`."""


FIXED_T = (
    "algorithm.temperature.calibrate=false",
    "algorithm.temperature.monitor_window=0",
    "algorithm.temperature.schedule=[]",
)
"""A fixed temperature: no calibration before step 1, no online monitor, no staged schedule."""

NAMED_ARMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "no-mask": (
        "no truncation mask: every truncated response keeps its advantage",
        ("algorithm.truncation_mask=none",),
    ),
    "mask-all": (
        "mask every truncated response (advantage 0)",
        ("algorithm.truncation_mask=all",),
    ),
    "mask-cond": (
        "the conditional truncation mask (truncated, non-incorrect, not looping, with prob rho)",
        ("algorithm.truncation_mask=conditional",),
    ),
    "clip-sym": (
        "symmetric clip 0.2 / 0.2 (no clip-higher)",
        ("algorithm.eps_low=0.2", "algorithm.eps_high=0.2"),
    ),
    "clip-higher": (
        "clip-higher 0.2 / 0.28",
        ("algorithm.eps_low=0.2", "algorithm.eps_high=0.28"),
    ),
    "no-kl": ("no KL penalty (kl_coef 0)", ("algorithm.kl_coef=0",)),
    "calibrated": (
        "temperature calibrated on the probe batch before step 1",
        ("algorithm.temperature.calibrate=true",),
    ),
}
"""Named override sets: name -> (description, overrides)."""

VALUED_ARMS: dict[str, tuple[str, Callable[[float], tuple[str, ...]]]] = {
    "T": (
        "fixed temperature {v:g} (calibration, monitor and schedule off)",
        lambda v: (f"algorithm.temperature.initial={v!r}", *FIXED_T),
    ),
    "kl": ("KL penalty coefficient {v:g}", lambda v: (f"algorithm.kl_coef={v!r}",)),
    "rho": (
        "conditional truncation mask with rho {v:g}",
        lambda v: ("algorithm.truncation_mask=conditional", f"algorithm.rho={v!r}"),
    ),
}
"""Valued arms `PREFIX=NUMBER`: prefix -> (description template, overrides of the value)."""


@dataclass(frozen=True)
class Choice:
    """A choice arm: one config key set to one name of a registry the learner owns."""

    key: str
    """The config key the arm sets, e.g. `algorithm.off_policy`."""
    what: str
    """What the key is, in words (the arm's description starts with it)."""
    module: str
    """The module holding the registry, imported only when a choice arm is parsed."""
    names: str
    """The registry's name in that module (a dict: choice -> function)."""
    describe: str
    """The module's function choice -> one line saying what the choice does."""

    def choices(self) -> list[str]:
        return list(getattr(importlib.import_module(self.module), self.names))

    def description(self, choice: str) -> str:
        line = getattr(importlib.import_module(self.module), self.describe)(choice)
        return f"{self.what} {choice}: {line}"


CHOICE_ARMS: dict[str, Choice] = {
    "off_policy": Choice(
        "algorithm.off_policy",
        "off-policy correction",
        "microcoder.learner.algorithm.off_policy",
        "OFF_POLICY",
        "describe",
    ),
    "policy_loss": Choice(
        "algorithm.policy_loss",
        "policy loss",
        "microcoder.learner.algorithm.policy_loss",
        "POLICY_LOSSES",
        "describe",
    ),
}
"""Choice arms `PREFIX=CHOICE`: prefix -> the key and the registry its choices come from."""

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=+-]*$")
"""Arm names become folder names: letters, digits and . _ = + - only."""


def preset_names() -> tuple[str, ...]:
    """The algorithm presets learner/algorithm/presets.py registers (none while it does not exist)."""
    try:
        presets = importlib.import_module("microcoder.learner.algorithm.presets")
    except ModuleNotFoundError:
        return ()
    return tuple(getattr(presets, "PRESETS", {}))


def valid_names() -> list[str]:
    """Every arm name, for error messages and `--help`: presets, named sets, valued forms."""
    valued = [f"{p}=<number>" for p in VALUED_ARMS]
    chosen = [f"{p}=<{'|'.join(c.choices())}>" for p, c in CHOICE_ARMS.items()]
    return [*preset_names(), *NAMED_ARMS, *valued, *chosen, "NAME:KEY=VALUE;KEY=VALUE"]


def parse_arm(text: str) -> Arm:
    """One arm from its name (see the module docstring for the forms)."""
    text = text.strip()
    if ":" in text:
        return _custom(text)
    if text in preset_names():
        presets = importlib.import_module("microcoder.learner.algorithm.presets")
        description = presets.PRESETS[text].description
        return Arm(text, description, (f"algorithm.preset={text}",), preset=text)
    if text in NAMED_ARMS:
        description, overrides = NAMED_ARMS[text]
        return Arm(text, description, overrides)
    prefix, eq, value = text.partition("=")
    if eq and prefix in VALUED_ARMS:
        try:
            number = float(value)
        except ValueError:
            raise ArmError(
                f"arm {text!r}: {value!r} is not a number; write it as {prefix}=0.6"
            ) from None
        template, make = VALUED_ARMS[prefix]
        return Arm(text, template.format(v=number), make(number))
    if eq and prefix in CHOICE_ARMS:
        return _choice(text, CHOICE_ARMS[prefix], value)
    raise ArmError(_unknown(text))


def _choice(text: str, choice: Choice, value: str) -> Arm:
    """A choice arm, its value checked against the registry (the nearest named if unknown)."""
    names = choice.choices()
    if value not in names:
        near = difflib.get_close_matches(value, names, n=1, cutoff=0.4)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        prefix = text.partition("=")[0]
        raise ArmError(
            f"arm {text!r}: no {choice.what} is named {value!r}{hint}; write it as "
            f"{prefix}=NAME with NAME one of {', '.join(names)}"
        )
    return Arm(text, choice.description(value), (f"{choice.key}={value}",))


def parse_arms(spec: str) -> list[Arm]:
    """A comma-separated list of arms (at least one, no name twice)."""
    names = [s.strip() for s in _split_top(spec) if s.strip()]
    if not names:
        raise ArmError("--arms is empty: give at least one arm, e.g. --arms no-mask,mask-all")
    arms = [parse_arm(n) for n in names]
    seen: set[str] = set()
    for arm in arms:
        if arm.name in seen:
            raise ArmError(f"arm {arm.name!r} is given twice in --arms; list each arm once")
        seen.add(arm.name)
    return arms


def resolve_overrides(arm: Arm, recipe: dict[str, Any], user_sets: list[str]) -> list[str]:
    """The arm's overrides for one recipe, then the command's --set (which come last).

    A preset fills only the fields nobody set, so a recipe that sets `algorithm.kl_coef` would
    silently keep it in a `grpo` arm: each preset value the recipe's TOML sets is passed
    explicitly too (a --set of the same key still wins). A --set of a key the arm itself sets
    would erase the difference between arms, so it is an error.
    """
    user_keys = {s.partition("=")[0].strip() for s in user_sets}
    for override in arm.overrides:
        key = override.partition("=")[0].strip()
        if key in user_keys:
            raise ArmError(
                f"--set {key} conflicts with arm {arm.name!r}, which sets it "
                f"({override}); drop the --set, or make it an arm (NAME:{key}=VALUE)"
            )
    explicit: list[str] = []
    if arm.preset:
        presets = importlib.import_module("microcoder.learner.algorithm.presets")
        algorithm = recipe.get("algorithm", {})
        for key, value in presets.flat_values(arm.preset).items():
            head, _, sub = key.partition(".")
            given = algorithm.get(head, {}).get(sub) if sub else algorithm.get(head)
            if given is not None and f"algorithm.{key}" not in user_keys and given != value:
                explicit.append(f"algorithm.{key}={toml_value(value)}")
    return [*arm.overrides, *explicit, *user_sets]


def toml_value(value: Any) -> str:
    """A value as the right-hand side of a `--set KEY=VALUE` (TOML syntax)."""

    return tomli_w.dumps({"v": value}).strip()[len("v = ") :]


def _split_top(spec: str) -> list[str]:
    """Split on commas, except inside a custom arm's `[...]` values (lists in overrides)."""
    parts = []
    depth = 0
    cur = []
    for ch in spec:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _custom(text: str) -> Arm:
    name, _, body = text.partition(":")
    if not SAFE_NAME.match(name):
        raise ArmError(
            f"arm {text!r}: the name {name!r} must be letters, digits and . _ = + - "
            "(it names the arm's folder), e.g. lr2:learner.lr=2e-4"
        )
    overrides = tuple(o.strip() for o in body.split(";") if o.strip())
    bad = [o for o in overrides if "=" not in o]
    if not overrides or bad:
        raise ArmError(
            f"arm {text!r}: write its overrides as KEY=VALUE separated by ';', "
            "e.g. lr2:learner.lr=2e-4;learner.batch_size=8"
        )
    return Arm(name, "; ".join(overrides), overrides)


def _unknown(text: str) -> str:
    names = [*preset_names(), *NAMED_ARMS, *(f"{p}=" for p in [*VALUED_ARMS, *CHOICE_ARMS])]
    near = difflib.get_close_matches(text, names, n=1, cutoff=0.4)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    presets = "" if preset_names() else " (no algorithm presets are registered yet)"
    return (
        f"unknown arm {text!r}{hint}; valid arms: {', '.join(valid_names())}{presets}. "
        "A custom arm is NAME:KEY=VALUE;KEY=VALUE"
    )

"""The base every config section derives from, and the layering rules (defaults < TOML < --set).

Each package owns the config section of its component (`sandbox/config.py`, `buffer/config.py`,
...); `launch/config.py` assembles them into the root `Config`. Fields are documented with a
docstring right under them (pydantic's `use_attribute_docstrings`), which is also what
`microcoder config show --docs` prints.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import typing
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError


class Section(BaseModel):
    """A config section: unknown keys are errors, fields are documented by their docstrings."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, validate_assignment=True
    )
    removed_keys: ClassVar[dict[str, str]] = {}
    """Keys this section once had -> what to do instead; a config that still sets one is told so
    (instead of the nearest-key guess, which could point at an unrelated key)."""
    legacy_keys: ClassVar[dict[str, str]] = {}
    """Keys this section once had that still load (old configs, the config.toml of a run to
    resume) -> what they became; the section's own validator maps each onto its successor and
    the root Config's notes() says what to set instead."""


class ConfigError(ValueError):
    """A config problem worded for the user: what is wrong, where, and how to fix it."""


def _suggest(key: str, options: list[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    if close:
        return f"; did you mean '{prefix}{close[0]}'?"
    return f"; valid keys here: {', '.join(sorted(options))}"


def _nearest_choice(error: dict[str, Any]) -> str:
    """For a value outside a Literal field's choices (pydantic's `literal_error`), the nearest
    choice as "; did you mean 'x'?", else ""."""
    if error.get("type") != "literal_error" or not isinstance(error.get("input"), str):
        return ""
    choices = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
    close = difflib.get_close_matches(error["input"], choices, n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_unknown_keys(model: type[BaseModel], raw: dict[str, Any], prefix: str = "") -> None:
    """Raise ConfigError for the first key in `raw` that `model` does not define, with a suggestion."""
    fields = model.model_fields
    for key, value in raw.items():
        path = f"{prefix}{key}"
        if key in getattr(model, "legacy_keys", {}):
            continue
        if key not in fields:
            instead = getattr(model, "removed_keys", {}).get(key)
            if instead:
                raise ConfigError(f"config key '{path}' was removed: {instead}")
            raise ConfigError(f"unknown config key '{path}'" + _suggest(key, list(fields), prefix))
        section = _section_of(fields[key].annotation)
        if isinstance(value, dict) and section is not None:
            check_unknown_keys(section, value, prefix=f"{path}.")


def _section_of(annotation: Any) -> type[BaseModel] | None:
    """The config model a field holds: its annotation, or the model of an optional one
    (`LoraConfig | None`); None for any other field."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def parse_value(text: str) -> Any:
    """Parse the right-hand side of `--set key=value` as a TOML value; bare words stay strings."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply one `a.b.c=value` assignment to the nested dict `raw` in place."""
    if "=" not in assignment:
        raise ConfigError(
            f"--set expects key=value, got '{assignment}' (example: --set learner.lr=1e-6)"
        )
    dotted, _, text = assignment.partition("=")
    parts = [p for p in dotted.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set has an empty key in '{assignment}'")
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: '{part}' is a value, not a section")
        node = child
    node[parts[-1]] = parse_value(text.strip())


def load_layers(
    model: type[BaseModel], path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
):
    """Build `model` from defaults < TOML file at `path` < `--set` overrides, with friendly errors."""
    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(
                f"config file {path} does not exist (recipes live in configs/, e.g. configs/tiny-cpu.toml)"
            )
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: not valid TOML: {err}") from err
    for assignment in overrides:
        apply_override(raw, assignment)
    check_unknown_keys(model, raw)
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            loc = ".".join(str(x) for x in e["loc"])
            if loc:
                lines.append(f"  {loc}: {e['msg']}{_nearest_choice(e)} (got {e.get('input')!r})")
            else:  # a rule across sections: its message names the keys; the input is everything
                lines.append(f"  {e['msg']}")
        where = f" in {path}" if path else ""
        raise ConfigError(f"invalid config{where}:\n" + "\n".join(lines)) from err


def describe(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, default, doc) for every leaf field, for `config show --docs`."""
    rows = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            rows += describe(ann, f"{prefix}{name}.")
        else:
            default = field.get_default(call_default_factory=True)
            rows.append((f"{prefix}{name}", repr(default), (field.description or "").strip()))
    return rows

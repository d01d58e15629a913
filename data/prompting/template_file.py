"""Prompt templates by name (`default`, `lcb`) or from a user's TOML file.

A template file has one table per problem kind, each with a `system` prompt and a `user`
message written as a Python `str.format` template over `{statement}`, `{starter_code}` and
`{fn_name}` (see prompt_templates.PromptFields; write `{{` and `}}` for literal braces):

    [functional]
    system = "You are a careful Python programmer."
    user = '''{statement}

    Complete `{fn_name}`:
    ```python
    {starter_code}
    ```'''

A kind the file leaves out is rendered as `default` renders it; `system = ""` means no system
message. Unknown kinds, keys or placeholders are errors that name the file and the fix.
"""

from __future__ import annotations

import difflib
import functools
import string
import tomllib
from pathlib import Path

from microcoder.data.problem import KINDS
from microcoder.data.prompting.templates import (
    BUILTIN,
    DEFAULT,
    KindTemplate,
    PromptFields,
    Template,
)

PLACEHOLDERS = tuple(PromptFields.__dataclass_fields__)
"""The names a user template may use: statement, starter_code, fn_name."""
KEYS = ("system", "user")


class PromptTemplateError(ValueError):
    """A bad `prompt.template` (unknown name, missing or malformed file), worded with the fix."""


def resolve_template(name: str) -> Template:
    """The template `prompt.template` names: a built-in one, or a TOML file (cached by path and
    modification time; kinds it leaves out come from `default`)."""
    if name in BUILTIN:
        return BUILTIN[name]
    path = Path(name)
    if not path.is_file():
        close = difflib.get_close_matches(name, list(BUILTIN), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise PromptTemplateError(
            f"prompt.template = {name!r} is neither a built-in template "
            f"({', '.join(BUILTIN)}) nor an existing file; {hint}set it to one of those names "
            "or to the path of a TOML template file (tables [stdin], [functional], [assert] "
            "with `system` and `user`)"
        )
    resolved = path.resolve()
    return _load_cached(str(resolved), resolved.stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int) -> Template:
    return {**DEFAULT, **load_template_file(path)}


def load_template_file(path: str | Path) -> dict[str, KindTemplate]:
    """The kinds a template file defines (only those); raises PromptTemplateError."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise PromptTemplateError(f"prompt template {path}: cannot read it ({e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise PromptTemplateError(f"prompt template {path}: not valid TOML: {e}") from None
    if not raw:
        raise PromptTemplateError(
            f"prompt template {path}: defines no kind; add a table [stdin], [functional] or "
            "[assert] with `system` and `user`"
        )
    return {kind: _kind(path, kind, table) for kind, table in raw.items()}


def _kind(path: Path, kind: str, table) -> KindTemplate:
    where = f"prompt template {path}: [{kind}]"
    if kind not in KINDS:
        raise PromptTemplateError(
            f"{where}: unknown problem kind; the kinds are {', '.join(KINDS)}"
        )
    if not isinstance(table, dict):
        raise PromptTemplateError(
            f"prompt template {path}: '{kind}' must be a table [{kind}] with `system` and `user`"
        )
    for key in table:
        if key not in KEYS:
            raise PromptTemplateError(f"{where}: unknown key '{key}'; the keys are system, user")
    for key in KEYS:
        if key not in table:
            hint = ' (system = "" for no system message)' if key == "system" else ""
            raise PromptTemplateError(f"{where}: missing `{key}`{hint}")
        if not isinstance(table[key], str):
            raise PromptTemplateError(f"{where}: `{key}` must be a string")
    user = table["user"]
    _check_placeholders(where, user)
    return KindTemplate(table["system"], lambda f: user.format(**_as_dict(f)))


def _as_dict(f: PromptFields) -> dict[str, str]:
    return {name: getattr(f, name) for name in PLACEHOLDERS}


def _check_placeholders(where: str, text: str) -> None:
    valid = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as e:
        raise PromptTemplateError(
            f"{where}: `user` is not a valid format string ({e}); write {{{{ and }}}} for "
            "literal braces"
        ) from None
    for name in names:
        if name not in PLACEHOLDERS:
            shown = "{" + name + "}" if name else "{}"
            raise PromptTemplateError(
                f"{where}: `user` uses unknown placeholder {shown}; use {valid} "
                "(write {{ and }} for literal braces)"
            )
    try:
        text.format(**dict.fromkeys(PLACEHOLDERS, ""))
    except (ValueError, KeyError, IndexError) as e:
        raise PromptTemplateError(f"{where}: `user` does not format ({e})") from None

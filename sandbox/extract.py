"""Pull the program out of a model response."""

from __future__ import annotations

import re

_BLOCK = re.compile(r"^[ \t]*```[ \t]*([\w+.#-]*)[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)
_OPEN = re.compile(r"^[ \t]*```[ \t]*(python3?|py)?[^\n]*\n", re.M | re.I)
_PYTHON = ("python", "python3", "py")


def extract_code(response: str) -> str | None:
    """The code to judge: the last fenced ```python block, else the last fenced block of any
    language, else (no fence at all) the whole text. An unclosed last fence (a truncated
    response) yields what follows it. None when nothing is left: the caller scores that as WA.
    """
    blocks = _BLOCK.findall(response)
    python = [body for lang, body in blocks if lang.lower() in _PYTHON]
    if python:
        code = python[-1]
    elif blocks:
        code = blocks[-1][1]
    else:
        opened = list(_OPEN.finditer(response))
        code = response[opened[-1].end() :] if opened else response
    return code if code.strip() else None

"""The names `algorithm.policy_loss` accepts, checked without torch (the config is read by the
launcher, which does not import torch): the built-ins of learner/algorithm/policy_loss.py and a
user's `module:function`, imported here."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

BUILTIN = ("clip", "dual-clip", "gspo", "cispo")
"""The built-in losses, in the order the docs list them (policy_loss.POLICY_LOSSES' keys)."""

SEQUENCE_LEVEL = frozenset({"gspo"})
"""The built-ins that read every token of a sequence at once (sequence parallelism splits a
sequence over ranks: learner/sequence_parallel.py refuses them)."""


def check(name: str) -> Callable[..., Any] | None:
    """None for a built-in; the function of a user's `module:function` (imported here). A
    ValueError saying what to set for anything else: an unknown name (with the nearest built-in
    and the list), a path that does not import, a name that is not a function."""
    if name in BUILTIN:
        return None
    if ":" not in name:
        close = difflib.get_close_matches(name, BUILTIN, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"unknown policy loss {name!r}; {hint}choose one of {', '.join(BUILTIN)}, or a user "
            'loss "module:function" (learner/algorithm/policy_loss.py: LossInput)'
        )
    module, _, attr = name.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except Exception as err:  # any failure to import it is the config's error
        raise ValueError(
            f"policy loss {name!r} does not import ({type(err).__name__}: {err}); the module must "
            "be importable by the learner (on PYTHONPATH or installed) and define the function"
        ) from err
    if not callable(fn):
        raise ValueError(f"policy loss {name!r} is not a function ({type(fn).__name__})")
    return fn

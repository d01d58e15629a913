"""The `[environment]` section: which environment shapes a trajectory, and the repair
environment's limits."""

from __future__ import annotations

import difflib

from pydantic import Field, field_validator

from microcoder.config import Section

BUILT_IN = ("single", "repair")
"""The environments registered in base.py; anything else must be `module:Class`."""


class EnvironmentConfig(Section):
    kind: str = "single"
    """`single` (one turn per response, the paper's setting and the default), `repair` (the
    program runs on the problem's visible tests; if it fails and turns remain, the feedback is
    appended and the model answers again; the final turn is judged on all tests), or
    `module:Class` (a user class: actors/environments/base.py `Environment`)."""
    max_turns: int = Field(2, ge=1, le=16)
    """The most model turns a trajectory has (`repair` and user environments)."""
    visible_tests: int = Field(1, ge=1)
    """How many of a problem's tests `repair` may show when the problem has no
    `public_tests` (the statement's examples): the first N, but never every test (at most all
    but one; a problem with a single test shows none, and its trajectory is one turn). The
    others are never shown; the final turn is judged on all of them."""
    feedback_chars: int = Field(400, ge=32)
    """Each part of `repair`'s feedback (the failing input or check, the expected and the
    actual output, stderr, the judge's reason) is cut to this many characters, the marker
    included (head and tail kept, the cut marked with how many characters went:
    actors/environments/feedback.py). The judge itself keeps at most 300 characters of a
    program's output (the head) and of its stderr (the tail), and 500 of its reason."""
    sandbox_timeout_s: float = Field(120.0, gt=0)
    """Deadline of one environment sandbox call in the executor pool (the wait for an executor,
    a retry on another after one died, and the run itself); past it the turn counts as failed
    with a system error (SE) and the trajectory ends there. No executor found within it: the
    step fails its group (actors/environments/executor_sandbox.py)."""

    @field_validator("kind")
    @classmethod
    def _known(cls, v: str) -> str:
        if v in BUILT_IN or (":" in v and all(v.partition(":")[::2])):
            return v
        close = difflib.get_close_matches(v, BUILT_IN, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"environment.kind {v!r} is not one of {', '.join(BUILT_IN)} nor a 'module:Class' "
            f"path{hint}"
        )

"""Prompts that keep failing are taken out of the run, so bad data cannot livelock it.

A failure is a generator's wave raising on the prompt (it reports `fail_group`) or the generator
holding it dying (`Release(died=True)`); a clean release never counts. A problem with
`after` failures is quarantined: the buffer never hands it out again (0 = never quarantine).
The counts travel in buffer snapshots, so a resumed run keeps its quarantine.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

log = logging.getLogger("microcoder.buffer")


class Quarantine:
    """Failed attempts per problem id, and the problems taken out of the run."""

    def __init__(self, after: int = 2):
        self.after = after
        self.failures: Counter = Counter()
        """Failed attempts per problem id."""
        self.reasons: dict[str, str] = {}
        """Quarantined problem id -> the reason of the failure that quarantined it."""

    def __contains__(self, problem_id: str) -> bool:
        return problem_id in self.reasons

    def __len__(self) -> int:
        return len(self.reasons)

    def failed(self, problem_id: str, reason: str) -> bool:
        """Count one failure; True when the problem is (now) quarantined."""
        self.failures[problem_id] += 1
        n = self.failures[problem_id]
        if self.after and n >= self.after and problem_id not in self.reasons:
            self.reasons[problem_id] = reason
            log.warning(
                "problem %r quarantined after %d failed attempts (last: %s); it is not handed "
                "out again in this run",
                problem_id,
                n,
                reason[:200],
            )
        return problem_id in self.reasons

    def state_dict(self) -> dict[str, Any]:
        return {"prompt_failures": dict(self.failures), "quarantined": dict(self.reasons)}

    def load_state_dict(self, data: dict[str, Any]) -> None:
        """Restore from `state_dict` (missing keys: nothing failed yet)."""
        failures = data.get("prompt_failures", {})
        self.failures = Counter({str(k): int(v) for k, v in failures.items()})
        self.reasons = {str(k): str(v) for k, v in data.get("quarantined", {}).items()}

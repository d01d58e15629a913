"""One issued group as the buffer keeps it (`Slot`), and one group as it leaves for the learner
(`Delivered`). Plain records: `BufferState` (buffer/state.py) moves slots through the stages
(accounting.py: STAGES) and keeps the counters exact; snapshot.py writes and reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from microcoder.buffer.prompts import PromptItem


@dataclass
class Slot:
    """One issued group: where it is, who holds it, and its payload once it exists."""

    group_id: int
    item: PromptItem
    issued_version: int
    stage: str = ""
    owner: str = ""
    since: float = 0.0
    oldest_version: int = 0
    n_responses: int = 0
    group: Any = None
    scores: Any = None


@dataclass
class Delivered:
    """A group handed to the learner: both blobs and its staleness at the learner's version."""

    group_id: int
    group: Any
    scores: Any
    staleness: int

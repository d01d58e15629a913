"""Where prompts come from: a pluggable source with epochs, seeded shuffling and a saved cursor.

Any object with the `PromptSource` methods works. `DatasetPrompts` walks a list of problems
(microcoder.data.problem.Problem records, bare ids, or (id, prompt) pairs) epoch after epoch,
each epoch in a seeded random order; its cursor (and the prompts returned for a retry) is plain
data that goes into buffer snapshots, so a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

import random
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class PromptItem:
    """One prompt to hand out."""

    problem_id: str
    prompt: str
    epoch: int = 0


class PromptSource(Protocol):
    """What the buffer needs from a prompt source."""

    def next(self) -> PromptItem | None:
        """The next prompt, or None when the source is exhausted for good."""

    def push_front(self, item: PromptItem) -> None:
        """Give back a prompt that was handed out but not completed; it comes out next."""

    def state_dict(self) -> dict[str, Any]:
        """The cursor as msgpack-able plain data."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a cursor saved by `state_dict` (ValueError if it does not fit)."""


class PromptTable(Protocol):
    """The run's training prompts as the buffer reads them, source by source, without holding
    them: row `index` of source `source` is (problem_id, rendered prompt text). The launcher's
    implementation reads the run's problem store (data/store.py); tests may use `ListPromptTable`.
    """

    def source_names(self) -> list[str]:
        """The sources' names in config order (metrics and snapshots name sources by these)."""

    def count(self, source: int) -> int:
        """Training prompts of source `source` (held-out and too-long prompts excluded)."""

    def item(self, source: int, index: int) -> tuple[str, str]:
        """(problem_id, prompt text) of row `index` (0 <= index < count(source))."""

    def fingerprint(self, source: int) -> int:
        """A checksum of the source's problem ids in row order (a snapshot's cursor refuses
        another)."""


class ListPromptTable:
    """A PromptTable over in-memory (problem_id, prompt) lists, one per source name."""

    def __init__(self, sources: dict[str, Sequence[tuple[str, str]]]):
        self._names = list(sources)
        self._rows = [list(rows) for rows in sources.values()]

    def source_names(self) -> list[str]:
        return list(self._names)

    def count(self, source: int) -> int:
        return len(self._rows[source])

    def item(self, source: int, index: int) -> tuple[str, str]:
        return self._rows[source][index]

    def fingerprint(self, source: int) -> int:
        return zlib.crc32("\x00".join(p for p, _ in self._rows[source]).encode())


def _as_pair(item: Any, render: Callable[[Any], str] | None) -> tuple[str, str]:
    if isinstance(item, str):
        return item, ""
    if isinstance(item, tuple):
        return str(item[0]), str(item[1])
    return str(item.id), render(item) if render else str(getattr(item, "prompt", ""))


class DatasetPrompts:
    """Problems in a seeded random order per epoch; `epochs=0` repeats forever."""

    def __init__(
        self,
        items: Sequence[Any],
        epochs: int = 0,
        seed: int = 0,
        shuffle: bool = True,
        render: Callable[[Any], str] | None = None,
    ):
        if not items:
            raise ValueError("the prompt source is empty: give the buffer at least one problem")
        self._pairs = [_as_pair(i, render) for i in items]
        self.epochs, self.seed, self.shuffle = epochs, seed, shuffle
        self._epoch, self._index = 0, 0
        self._order = self._order_of(0)
        self._returned: deque[PromptItem] = deque()

    def _order_of(self, epoch: int) -> list[int]:
        order = list(range(len(self._pairs)))
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    @property
    def size(self) -> int:
        """Distinct prompts in one epoch."""
        return len(self._pairs)

    def fingerprint(self) -> int:
        """A checksum of the problem ids in dataset order (guards against restoring a cursor
        onto a different dataset)."""
        return zlib.crc32("\x00".join(p for p, _ in self._pairs).encode())

    def next(self) -> PromptItem | None:
        if self._returned:
            return self._returned.popleft()
        if self._index >= len(self._order):
            if self.epochs and self._epoch + 1 >= self.epochs:
                return None
            self._epoch, self._index = self._epoch + 1, 0
            self._order = self._order_of(self._epoch)
        pid, prompt = self._pairs[self._order[self._index]]
        self._index += 1
        return PromptItem(pid, prompt, self._epoch)

    def push_front(self, item: PromptItem) -> None:
        self._returned.appendleft(item)

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self._epoch,
            "index": self._index,
            "fingerprint": self.fingerprint(),
            "seed": self.seed,
            "returned": [[i.problem_id, i.prompt, i.epoch] for i in self._returned],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("fingerprint") != self.fingerprint():
            raise ValueError(
                "the snapshot's prompt cursor belongs to a different dataset (problem ids differ); "
                "restore with the same data.source, or start the run without the buffer snapshot"
            )
        saved = state.get("seed", self.seed)  # snapshots before issue 35 do not record it
        if self.shuffle and saved != self.seed:
            raise ValueError(
                f"the snapshot's prompt cursor walks the order of seed {saved}, this run's is "
                f"{self.seed}; resume with the run's own seed (drop --set seed=...), or set "
                f"data.shuffle_seed = {saved} to keep the order"
            )
        self._epoch, self._index = int(state["epoch"]), int(state["index"])
        self._order = self._order_of(self._epoch)
        self._returned = deque(PromptItem(str(p), str(t), int(e)) for p, t, e in state["returned"])

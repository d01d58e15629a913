"""Where prompts come from: a pluggable source with epochs, seeded shuffling and a saved cursor.

Any object with the `PromptSource` methods works. `MixturePrompts` draws from the sources of a
`PromptTable` by weight, each source walked epoch after epoch in a seeded random order of its
own; `DatasetPrompts` is its one-source form over a list of problems
(microcoder.data.problem.Problem records, bare ids, or (id, prompt) pairs). The cursor (and the
prompts returned for a retry) is plain data that goes into buffer snapshots, so a resumed run
continues exactly where it stopped.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class PromptItem:
    """One prompt to hand out."""

    problem_id: str
    prompt: str
    epoch: int = 0
    """Pass over its source this prompt belongs to."""
    source: str = ""
    """Name of the source it comes from (data.sources' display name; "" for a bare list)."""


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


class MixturePrompts:
    """A weighted mixture of the table's sources. Each prompt comes from a source drawn by
    weight; each source walks its own seeded shuffle per epoch and counts its own epochs.
    `epochs=0` repeats every source forever; with `epochs` > 0 a source that finished its passes
    leaves the mixture (the others' weights renormalize) and `next` returns None once all have.

    Memory: a source holds only the permutation of its current epoch (int32, 4 bytes a row;
    none without `shuffle`); rows are read from the table when handed out. The draw of the
    source is a function of (seed, draw number), so the cursor is the draw counter plus each
    source's (epoch, index): a resume continues exactly. With one source no draws are made and
    the order is DatasetPrompts' of old (random.Random(seed * 1_000_003 + epoch).shuffle).
    """

    def __init__(
        self,
        table: PromptTable,
        weights: Sequence[float],
        epochs: int = 0,
        seed: int = 0,
        shuffle: bool = True,
    ):
        self.table = table
        self.names = list(table.source_names())
        if len(weights) != len(self.names):
            raise ValueError(
                f"{len(weights)} weights for {len(self.names)} prompt sources {self.names}"
            )
        if any(not w > 0 for w in weights):
            raise ValueError(f"prompt source weights must be > 0, got {list(weights)}")
        self.weights = [float(w) for w in weights]
        self.counts = [int(table.count(s)) for s in range(len(self.names))]
        if not self.names or sum(self.counts) == 0:
            raise ValueError("the prompt source is empty: give the buffer at least one problem")
        empty = [n for n, c in zip(self.names, self.counts, strict=True) if c == 0]
        if empty:
            raise ValueError(
                f"prompt source {empty[0]!r} has no training prompts (all held out or too "
                "long?); drop it from data.sources or lower its holdout_fraction"
            )
        self.epochs = epochs
        self.seed = seed
        self.shuffle = shuffle
        n = len(self.names)
        self._epoch = [0] * n
        self._index = [0] * n
        self._draws = 0
        self._orders: list[tuple[int, np.ndarray] | None] = [None] * n
        self._returned: deque[PromptItem] = deque()
        self._fingerprints: list[int] | None = None

    def fingerprints(self) -> list[int]:
        """Each source's `table.fingerprint`, computed once (a store's reads every id)."""
        if self._fingerprints is None:
            self._fingerprints = [self.table.fingerprint(s) for s in range(len(self.names))]
        return self._fingerprints

    # ------------------------------------------------------------ order

    def _order(self, source: int) -> np.ndarray | None:
        """The permutation of the source's current epoch (None without shuffle)."""
        if not self.shuffle:
            return None
        held = self._orders[source]
        epoch = self._epoch[source]
        if held is None or held[0] != epoch:
            n = self.counts[source]
            order = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
            # the per-epoch seed of DatasetPrompts; random.shuffle works on the array in place
            random.Random(self._source_seed(source) * 1_000_003 + epoch).shuffle(order)
            held = self._orders[source] = (epoch, order)
        return held[1]

    def _source_seed(self, source: int) -> int:
        """Source 0 walks the run's seed (the one-source order of old); the others a seed of
        their own, so two sources of equal size do not share a permutation."""
        return self.seed if source == 0 else self.seed + 7919 * source

    def _finished(self, source: int) -> bool:
        return (
            self._index[source] >= self.counts[source]
            and self.epochs > 0
            and self._epoch[source] + 1 >= self.epochs
        )

    def _draw(self, live: list[int]) -> int:
        """Source of draw number `self._draws` among `live`, by weight (stateless: a hash of
        the seed and the draw number gives the uniform variate)."""
        if len(live) == 1:
            return live[0]
        digest = hashlib.blake2b(f"{self.seed}:{self._draws}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "little") / 2**64
        total = sum(self.weights[s] for s in live)
        acc = 0.0
        for s in live:
            acc += self.weights[s] / total
            if u < acc:
                return s
        return live[-1]

    # ------------------------------------------------------------ PromptSource

    @property
    def size(self) -> int:
        """Distinct prompts of one pass over every source."""
        return sum(self.counts)

    def source_epochs(self) -> dict[str, int]:
        """Each source's current epoch (0-based), by name."""
        return dict(zip(self.names, self._epoch, strict=True))

    def next(self) -> PromptItem | None:
        if self._returned:
            return self._returned.popleft()
        live = [s for s in range(len(self.names)) if not self._finished(s)]
        if not live:
            return None
        source = self._draw(live)
        self._draws += 1
        if self._index[source] >= self.counts[source]:
            self._epoch[source] += 1
            self._index[source] = 0
        order = self._order(source)
        i = self._index[source]
        row = int(order[i]) if order is not None else i
        self._index[source] = i + 1
        pid, prompt = self.table.item(source, row)
        return PromptItem(pid, prompt, self._epoch[source], self.names[source])

    def push_front(self, item: PromptItem) -> None:
        self._returned.appendleft(item)

    def state_dict(self) -> dict[str, Any]:
        return {
            "mixture": 1,
            "seed": self.seed,
            "draws": self._draws,
            "sources": [
                {
                    "name": name,
                    "weight": self.weights[s],
                    "fingerprint": self.fingerprints()[s],
                    "epoch": self._epoch[s],
                    "index": self._index[s],
                }
                for s, name in enumerate(self.names)
            ],
            "returned": [[i.problem_id, i.prompt, i.epoch, i.source] for i in self._returned],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "mixture" not in state:
            state = self._from_single(state)
        saved = [s["name"] for s in state["sources"]]
        if saved != self.names:
            raise ValueError(
                f"the snapshot's prompt cursor walks the sources {saved}, this run's are "
                f"{self.names}; resume with the same data.sources (names and order), or start "
                "the run without the buffer snapshot"
            )
        for s, entry in enumerate(state["sources"]):
            if entry["fingerprint"] != self.fingerprints()[s]:
                raise ValueError(
                    f"the snapshot's prompt cursor belongs to a different dataset (problem ids "
                    f"of source {entry['name']!r} differ); restore with the same data.source(s), "
                    "or start the run without the buffer snapshot"
                )
        weights = [float(s["weight"]) for s in state["sources"]]
        if len(self.names) > 1 and weights != self.weights:
            raise ValueError(
                f"the snapshot's prompt cursor draws with weights {weights}, this run's are "
                f"{self.weights}; resume with the same data.sources weights, or start the run "
                "without the buffer snapshot"
            )
        saved_seed = state.get("seed", self.seed)  # snapshots before issue 35 do not record it
        if self.shuffle and saved_seed != self.seed:
            raise ValueError(
                f"the snapshot's prompt cursor walks the order of seed {saved_seed}, this run's "
                f"is {self.seed}; resume with the run's own seed (drop --set seed=...), or set "
                f"data.shuffle_seed = {saved_seed} to keep the order"
            )
        returned = deque(
            PromptItem(str(r[0]), str(r[1]), int(r[2]), str(r[3]) if len(r) > 3 else "")
            for r in state["returned"]
        )
        self._draws = int(state["draws"])
        self._epoch = [int(s["epoch"]) for s in state["sources"]]
        self._index = [int(s["index"]) for s in state["sources"]]
        self._orders = [None] * len(self.names)
        self._returned = returned

    def _from_single(self, state: dict[str, Any]) -> dict[str, Any]:
        """A cursor of the one-source DatasetPrompts (snapshots before mixtures) as a mixture
        cursor: it fits a one-source run only."""
        if len(self.names) != 1:
            raise ValueError(
                "the snapshot's prompt cursor is a one-source cursor (written before data.sources "
                f"existed), this run mixes {self.names}; resume with the single data.source, or "
                "start the run without the buffer snapshot"
            )
        name = self.names[0]
        return {
            "mixture": 1,
            "seed": state.get("seed", self.seed),
            "draws": 0,
            "sources": [
                {
                    "name": name,
                    "weight": self.weights[0],
                    "fingerprint": state.get("fingerprint"),
                    "epoch": state["epoch"],
                    "index": state["index"],
                }
            ],
            "returned": [[*r[:3], name] for r in state["returned"]],
        }


class DatasetPrompts(MixturePrompts):
    """One list of problems in a seeded random order per epoch; `epochs=0` repeats forever.
    `items`: microcoder.data.problem.Problem records, bare ids, or (id, prompt) pairs. A
    one-source MixturePrompts (source name "") over a ListPromptTable."""

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
        table = ListPromptTable({"": [_as_pair(i, render) for i in items]})
        super().__init__(table, [1.0], epochs=epochs, seed=seed, shuffle=shuffle)

    def fingerprint(self) -> int:
        """A checksum of the problem ids in dataset order (guards against restoring a cursor
        onto a different dataset)."""
        return self.table.fingerprint(0)

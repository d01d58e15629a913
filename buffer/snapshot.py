"""Snapshot / restore of a BufferState: every group accepted and not consumed, the counters,
the learner version, the prompt cursor, the quarantine and the online-difficulty state (retired
and deferred problems, buffer/difficulty.py), in one msgpack file (no pickle), written atomically.

Consumed groups the learner may still report as filtered are kept too, so a report that
arrives after a restore still gives their admission capacity back.
On restore, leases are returned as the actors holding them are gone: leased prompts are counted
failed (`lease_released`) and re-queued at the front of the prompt source; groups that were being
scored go back to the front of the unscored queue. Nothing accepted is lost.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from microcoder.buffer.accounting import Counters
from microcoder.buffer.prompts import PromptItem
from microcoder.buffer.slot import Slot
from microcoder.buffer.state import BufferState
from microcoder.buffer.wire import pack, unpack

FORMAT = "microcoder-buffer-snapshot/2"
"""2: groups stored in the columnar layout of protocol 3 (codec.py)."""


def _raw(frames: Any) -> Any:
    """Stored frames as plain bytes: a group's (meta, text, tensors), or its scores' frame."""
    if frames is None:
        return None
    if isinstance(frames, (tuple, list)):
        return [bytes(f) for f in frames]
    return bytes(frames)


def _frames(data: Any) -> Any:
    return tuple(data) if isinstance(data, list) else data


def export_state(state: BufferState) -> dict[str, Any]:
    """The state as plain msgpack-able data."""
    slots = []
    for s in state.slots.values():
        slots.append(
            {
                "group_id": s.group_id,
                "problem_id": s.item.problem_id,
                "prompt": s.item.prompt,
                "epoch": s.item.epoch,
                "source": s.item.source,
                "issued_version": s.issued_version,
                "stage": s.stage,
                "owner": s.owner,
                "oldest_version": s.oldest_version,
                "n_responses": s.n_responses,
                "group": _raw(s.group),
                "scores": _raw(s.scores),
            }
        )
    return {
        "format": FORMAT,
        "version": state.version,
        "next_id": state.next_id,
        "source_done": state.source_done,
        "counters": state.counters.to_dict(),
        "prompt_cursor": state.prompts.state_dict(),
        "slots": slots,
        "unscored": list(state.unscored),
        "scored": list(state.scored),
        "awaiting_filter": list(state.awaiting_filter),
        **state.quarantine.state_dict(),
        "difficulty": state.difficulty.state_dict(),
    }


def import_state(state: BufferState, data: dict[str, Any]) -> None:
    """Replace `state`'s contents by `data` (from export_state), then return every lease."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(
            f"not a buffer snapshot in format {FORMAT}; was it written by this version?"
        )
    state.prompts.load_state_dict(data["prompt_cursor"])
    state.version = int(data["version"])
    state.next_id = int(data["next_id"])
    state.source_done = bool(data["source_done"])
    state.counters = Counters.from_dict(data["counters"])
    state.slots.clear()
    state.depth.clear()
    for d in data["slots"]:
        item = PromptItem(d["problem_id"], d["prompt"], d["epoch"], d.get("source", ""))
        slot = Slot(
            d["group_id"],
            item,
            d["issued_version"],
            d["stage"],
            d["owner"],
            0.0,
            d["oldest_version"],
            d["n_responses"],
            _frames(d["group"]),
            _frames(d["scores"]),
        )
        state.slots[slot.group_id] = slot
        state.depth[slot.stage] += 1
    state.unscored.clear()
    state.unscored.extend(data["unscored"])
    state.scored.clear()
    state.scored.extend(data["scored"])
    state.awaiting_filter = dict.fromkeys(data.get("awaiting_filter", []))
    state.quarantine.load_state_dict(data)
    state.difficulty.load_state_dict(data.get("difficulty") or {})  # absent before issue 45
    for owner in sorted(
        {s.owner for s in state.slots.values() if s.stage in ("leased", "scoring")}
    ):
        state.release(owner, reason="lease_released")


def save_snapshot(state: BufferState, path: str | Path) -> tuple[int, int]:
    """Write the snapshot atomically; returns (groups held, bytes written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = pack(export_state(state))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return sum(1 for s in state.slots.values() if s.group is not None), len(data)


def load_snapshot(state: BufferState, path: str | Path) -> int:
    """Restore `state` from the file at `path`; returns how many groups it holds."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"buffer snapshot {path} does not exist")
    import_state(state, unpack(path.read_bytes()))
    return sum(1 for s in state.slots.values() if s.group is not None)

"""The buffer's bookkeeping without any sockets: queues, leases, staleness drops, accounting.

`BufferState` is a plain object driven by the server loop (and directly by the property tests);
each issued group is a `Slot` (buffer/slot.py) that moves through the stages.
Group payloads are opaque blobs here (validated by the server before they arrive), so a group
is stored once and forwarded as the same bytes. Time is passed in (`now`), never read.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from typing import Any

from microcoder.buffer.accounting import STAGES, Counters, counter_rates, invariant_violations
from microcoder.buffer.codec import GroupInfo, ScoresInfo
from microcoder.buffer.difficulty import DifficultyTracker, scores_counts
from microcoder.buffer.prompts import PromptSource
from microcoder.buffer.quarantine import Quarantine
from microcoder.buffer.slot import Delivered, Slot
from microcoder.buffer.staleness import admission_capacity, staleness, within_bound
from microcoder.protocol import Group, GroupScores, PromptAssignment

log = logging.getLogger("microcoder.buffer")

ACCEPTED = "accepted"
FULL = "full"
HOLDER_DIED = "holder_died"
"""Release reason when the holder's process died: its leased prompts count as failed attempts."""


class BufferState:
    """Queues prompts -> unscored -> scored with leases, the staleness gate and admission control."""

    def __init__(
        self,
        prompts: PromptSource,
        batch_size: int,
        max_staleness: int,
        high_water: int = 1024,
        lease_timeout_s: float = 0.0,
        quarantine_after: int = 2,
        retire_solved_after: int = 0,
        skip_unsolved_after: int = 0,
    ):
        self.prompts = prompts
        self.batch_size = batch_size
        self.max_staleness = max_staleness
        self.high_water = high_water
        self.lease_timeout_s = lease_timeout_s
        self.slots: dict[int, Slot] = {}
        self.unscored: deque[int] = deque()
        self.scored: deque[int] = deque()
        self.depth: Counter = Counter()
        self.version = 0
        self.next_id = 1
        self.source_done = False
        self.awaiting_filter: dict[int, None] = {}
        """Ids of recently consumed groups the learner may still report as filtered (oldest
        first, at most `filter_memory`); a reported id leaves it, so a report counts once."""
        self.filter_memory = max(4096, 16 * batch_size)
        self.quarantine = Quarantine(quarantine_after)
        """Problems whose prompts keep failing, never handed out again (buffer/quarantine.py)."""
        self.difficulty = DifficultyTracker(retire_solved_after, skip_unsolved_after)
        """Per-problem pass rates; retired and deferred problems (buffer/difficulty.py)."""
        self.counters = Counters()
        self.rates = counter_rates()

    # ------------------------------------------------------------ transitions

    def _enter(self, slot: Slot, stage: str, owner: str = "", now: float = 0.0) -> None:
        c = self.counters
        if slot.stage:
            c.left[slot.stage] += 1
            self.depth[slot.stage] -= 1
        slot.stage = stage
        slot.owner = owner
        slot.since = now
        c.entered[stage] += 1
        self.depth[stage] += 1

    def _end(self, slot: Slot, outcome: str, reason: str = "") -> None:
        """Close a slot as consumed, dropped_stale or failed (the caller unlinks it from queues)."""
        c = self.counters
        c.left[slot.stage] += 1
        self.depth[slot.stage] -= 1
        del self.slots[slot.group_id]
        if outcome == "consumed":
            c.consumed += 1
        elif outcome == "dropped_stale":
            c.dropped_stale += 1
        else:
            c.failed += 1
            c.failed_by_reason[reason or "unspecified"] += 1

    def _log_drops(self, n: int, worst: int, where: str) -> None:
        if n:
            log.warning(
                "dropped %d stale group(s) %s at learner version %d (staleness up to %d > "
                "max_staleness %d); raise buffer.max_staleness, or add generators/executors so "
                "groups reach the learner sooner",
                n,
                where,
                self.version,
                worst,
                self.max_staleness,
            )

    def _sweep(self, queue: deque[int], where: str) -> None:
        """Drop every group in `queue` that can no longer pass the staleness rule."""
        keep = deque()
        dropped = 0
        worst = 0
        for gid in queue:
            slot = self.slots[gid]
            if within_bound(self.version, slot.oldest_version, self.max_staleness):
                keep.append(gid)
            else:
                worst = max(worst, staleness(self.version, slot.oldest_version))
                self._end(slot, "dropped_stale")
                dropped += 1
        queue.clear()
        queue.extend(keep)
        self._log_drops(dropped, worst, where)

    def advance(self, version: int) -> None:
        """The learner reached `version` (versions only grow; lower ones are ignored)."""
        if version > self.version:
            self.version = version
            self._sweep(self.unscored, "waiting for an executor")
            self._sweep(self.scored, "waiting for the learner")

    # ------------------------------------------------------------ prompts

    def capacity(self) -> int:
        in_flight = sum(self.depth.values())
        trained = self.counters.consumed - self.counters.filtered
        return admission_capacity(
            self.max_staleness, self.version, self.batch_size, trained, in_flight
        )

    def get_prompts(self, owner: str, n: int, now: float) -> list[PromptAssignment]:
        """Lease up to `n` prompts to `owner`, as many as admission control allows."""
        out = []
        if self._all_out():
            return out
        want = min(n, self.capacity())
        difficulty = self.difficulty if self.difficulty.on else None
        # bounds the scan past quarantined, retired and deferred prompts
        skips_left = (
            want + len(self.quarantine) + (len(difficulty) if difficulty is not None else 0)
        )
        while len(out) < want:
            item = self.prompts.next()
            if item is None:
                self.source_done = True
                break
            if item.problem_id in self.quarantine or (
                difficulty is not None and not difficulty.eligible(item.problem_id, item.epoch)
            ):
                skips_left -= 1
                if skips_left < 0:
                    break
                continue
            slot = Slot(self.next_id, item, self.version)
            self.next_id += 1
            self.slots[slot.group_id] = slot
            self.counters.issued += 1
            self._enter(slot, "leased", owner, now)
            out.append(
                PromptAssignment(
                    slot.group_id,
                    item.problem_id,
                    item.prompt,
                    item.epoch,
                    self.version,
                    item.source,
                )
            )
        return out

    def _all_out(self) -> bool:
        """Every prompt of the source is quarantined or retired: the source is done (said once)."""
        size = getattr(self.prompts, "size", None)
        retired = self.difficulty.retired
        if size is None or len(self.quarantine) + len(retired) < size:
            return False
        both = sum(1 for p in retired if p in self.quarantine) if retired and self.quarantine else 0
        if len(self.quarantine) + len(retired) - both < size:
            return False
        if not self.source_done:
            if not retired:
                log.error(
                    "every one of the %d prompts is quarantined (each failed %d times): nothing "
                    "left to generate; see the generators' logs for why their waves failed",
                    size,
                    self.quarantine.after,
                )
            else:
                log.warning(
                    "every one of the %d prompts is retired (%d: solved in each of their last "
                    "%d groups, data.retire_solved_after) or quarantined (%d): nothing left to "
                    "generate; the source is done",
                    size,
                    len(retired),
                    self.difficulty.retire_after,
                    len(self.quarantine),
                )
        self.source_done = True
        return True

    @property
    def prompts_done(self) -> bool:
        """No prompt will ever be handed out again."""
        return self.source_done and self.depth["leased"] == 0

    @property
    def finished(self) -> bool:
        """Everything issued has reached the scored queue or ended, and no prompt is left."""
        return self.prompts_done and sum(self.depth.values()) == self.depth["scored"]

    # ------------------------------------------------------------ leases

    def _held(self, owner: str, gid: int, stage: str) -> Slot | str:
        slot = self.slots.get(gid)
        if slot is None or slot.stage != stage:
            return f"group {gid} is not in stage '{stage}' here (released, expired, failed or done)"
        if slot.owner != owner:
            return f"group {gid} is leased to '{slot.owner}', not to '{owner}'"
        return slot

    def fail_group(self, owner: str, gid: int, reason: str) -> str:
        """`owner` gives up on a prompt or group it holds; ACCEPTED or why not."""
        slot = self.slots.get(gid)
        if slot is None or slot.stage not in ("leased", "scoring") or slot.owner != owner:
            return f"group {gid} is not leased to '{owner}'"
        if slot.stage == "leased":
            self.quarantine.failed(slot.item.problem_id, reason or "reported_failure")
        self._end(slot, "failed", reason or "reported_failure")
        return ACCEPTED

    def _return(self, slot: Slot, reason: str) -> None:
        if slot.stage == "leased":
            self._end(slot, "failed", reason)
            died = reason == HOLDER_DIED
            if died and self.quarantine.failed(slot.item.problem_id, "its generator died"):
                return  # maybe this prompt killed it, twice: quarantined, not re-queued
            self.prompts.push_front(slot.item)
            self.source_done = False
        else:
            self._enter(slot, "unscored")
            self.unscored.appendleft(slot.group_id)

    def release(self, owner: str, reason: str = "lease_released") -> tuple[int, int]:
        """Return all of `owner`'s leases: (prompts re-queued, groups back to the unscored queue)."""
        held = sorted(
            (
                s
                for s in self.slots.values()
                if s.owner == owner and s.stage in ("leased", "scoring")
            ),
            key=lambda s: -s.group_id,
        )
        for slot in held:
            self._return(slot, reason)
        prompts = sum(1 for s in held if s.stage != "unscored")
        return prompts, len(held) - prompts

    def expire(self, now: float) -> int:
        """Return leases older than lease_timeout_s (0 = never); how many were returned."""
        if self.lease_timeout_s <= 0:
            return 0
        old = [
            s
            for s in self.slots.values()
            if s.stage in ("leased", "scoring") and now - s.since > self.lease_timeout_s
        ]
        for slot in sorted(old, key=lambda s: -s.group_id):
            log.warning(
                "lease of group %d by '%s' expired after %.0f s; returned (raise "
                "buffer.lease_timeout_s if actors are just slow)",
                slot.group_id,
                slot.owner,
                self.lease_timeout_s,
            )
            self._return(slot, "lease_expired")
        return len(old)

    # ------------------------------------------------------------ groups

    def put_unscored(self, owner: str, group: Group | GroupInfo, blob: Any, now: float) -> str:
        """A generator hands in a group: ACCEPTED, FULL (retry later) or why it was rejected."""
        slot = self._held(owner, group.group_id, "leased")
        if isinstance(slot, str):
            return slot
        if group.problem_id != slot.item.problem_id:
            return f"group {group.group_id} is for problem '{slot.item.problem_id}', not '{group.problem_id}'"
        if group.source != slot.item.source:
            return (
                f"group {group.group_id} is from source '{slot.item.source}', not "
                f"'{group.source}'; copy PromptAssignment.source into the Group"
            )
        if not group.n_responses:
            return f"group {group.group_id} has no responses"
        if self.depth["unscored"] >= self.high_water:
            return FULL
        slot.group = blob
        slot.oldest_version = group.min_policy_version
        slot.n_responses = group.n_responses
        self.counters.response_tokens_in += group.n_tokens
        self._enter(slot, "unscored", "", now)
        self.unscored.append(slot.group_id)
        if not within_bound(self.version, slot.oldest_version, self.max_staleness):
            self.unscored.pop()
            self._log_drops(1, staleness(self.version, slot.oldest_version), "on arrival")
            self._end(slot, "dropped_stale")
            return f"group {group.group_id} dropped: already staler than max_staleness"
        return ACCEPTED

    def get_unscored(self, owner: str, n: int, now: float) -> list[tuple[int, Any]]:
        """Lease up to `n` unscored groups to executor `owner`: [(group_id, group blob)]."""
        out = []
        while self.unscored and len(out) < n:
            slot = self.slots[self.unscored.popleft()]
            self._enter(slot, "scoring", owner, now)
            out.append((slot.group_id, slot.group))
        return out

    def put_scored(
        self, owner: str, scores: GroupScores | ScoresInfo, blob: Any, now: float
    ) -> str:
        """An executor hands in a group's scores: ACCEPTED, FULL or why it was rejected."""
        slot = self._held(owner, scores.group_id, "scoring")
        if isinstance(slot, str):
            return slot
        if scores.n_scores != slot.n_responses:
            return f"group {scores.group_id}: {scores.n_scores} scores for {slot.n_responses} responses"
        if self.depth["scored"] >= self.high_water:
            return FULL
        slot.scores = blob
        if self.difficulty.on:
            correct, judged = scores_counts(scores)
            if judged:
                self.difficulty.record(slot.item.problem_id, correct / judged, slot.item.epoch)
        if not within_bound(self.version, slot.oldest_version, self.max_staleness):
            self._log_drops(1, staleness(self.version, slot.oldest_version), "after scoring")
            self._end(slot, "dropped_stale")
            return f"group {scores.group_id} dropped: staler than max_staleness"
        self._enter(slot, "scored", "", now)
        self.scored.append(slot.group_id)
        return ACCEPTED

    def get_batch(self, n: int, version: int) -> tuple[list[Delivered], bool] | None:
        """Exactly `n` groups for a learner at `version` (fewer only when the run is finished,
        with done=True), or None when not enough fresh groups are there yet."""
        self.advance(version)
        if len(self.scored) < n and not self.finished:
            return None
        out = []
        while self.scored and len(out) < n:
            slot = self.slots[self.scored.popleft()]
            # The queue was swept at >= version, so this holds; assert the one rule anyway.
            assert within_bound(version, slot.oldest_version, self.max_staleness)
            s = staleness(version, slot.oldest_version)
            self.counters.staleness_hist[str(s)] += 1
            self._end(slot, "consumed")
            self.awaiting_filter[slot.group_id] = None
            out.append(Delivered(slot.group_id, slot.group, slot.scores, s))
        while len(self.awaiting_filter) > self.filter_memory:
            del self.awaiting_filter[next(iter(self.awaiting_filter))]
        return out, self.finished and not self.scored

    def report_filtered(self, group_ids: list[int]) -> int:
        """The learner consumed these delivered groups but did not train on them (dynamic
        filtering). Each counts once in `filtered` (they stay `consumed`), which gives their
        admission capacity back; ids not delivered recently or already reported are ignored,
        so a retried report is harmless. Returns how many were counted."""
        counted = 0
        for gid in group_ids:
            if gid in self.awaiting_filter:
                del self.awaiting_filter[gid]
                counted += 1
            else:
                self.counters.filtered_ignored += 1
        self.counters.filtered += counted
        return counted

    # ------------------------------------------------------------ views

    def depths(self) -> dict[str, int]:
        return {s: self.depth[s] for s in STAGES}

    def violations(self) -> list[str]:
        """Accounting invariant violations (empty = exact); also checks queues match stages."""
        out = invariant_violations(self.counters, self.depths())
        if len(self.unscored) != self.depth["unscored"] or len(self.scored) != self.depth["scored"]:
            out.append("queue lengths differ from stage depths")
        if len(self.slots) != sum(self.depth.values()):
            out.append(f"{len(self.slots)} live slots but in_flight {sum(self.depth.values())}")
        return out

    def stats(self, now: float) -> dict[str, Any]:
        """Everything the dashboard shows; see buffer/accounting.py for the counters."""
        self.rates.update(now, self.counters.rate_totals())
        c = self.counters.to_dict()
        viol = self.violations()
        depths = self.depths()
        return {
            **c,
            "version": self.version,
            "max_staleness": self.max_staleness,
            "batch_size": self.batch_size,
            "high_water_groups": self.high_water,
            "in_flight": sum(depths.values()),
            "trained": self.counters.consumed - self.counters.filtered,
            "depths": depths,
            "admission_capacity": self.capacity(),
            "prompts_done": self.prompts_done,
            "finished": self.finished,
            "prompt_cursor": self.prompts.state_dict(),
            "quarantined": len(self.quarantine),
            "quarantined_ids": sorted(self.quarantine.reasons)[:20],
            **self.difficulty.stats(),
            "rates": dict(self.rates.rates),
            "invariant_ok": not viol,
            "invariant_violations": viol,
        }

"""The staleness rule and the admission-control formula, each in exactly one place.

What they mean for the whole system: docs/architecture.md §4.

Every decision in the buffer about "too old" goes through `within_bound`; every decision about
"may we hand out another prompt" goes through `admission_capacity`. Both are pure functions.
"""

from __future__ import annotations


def staleness(consumer_version: int, oldest_policy_version: int) -> int:
    """Staleness of a group consumed at `consumer_version`: v − min(policy_version of responses)."""
    return consumer_version - oldest_policy_version


def within_bound(consumer_version: int, oldest_policy_version: int, max_staleness: int) -> bool:
    """THE staleness rule: a group may be handed to a learner at `consumer_version` only if its
    staleness is at most `max_staleness` (k = 0: synchronous on-policy GRPO).

    Versions only grow, so a group that fails this at the latest known version can never pass
    later: the buffer drops it as soon as that is known.
    """
    return staleness(consumer_version, oldest_policy_version) <= max_staleness


def admission_capacity(
    max_staleness: int, version: int, batch_size: int, trained: int, in_flight: int
) -> int:
    """How many more prompts may be handed out now (never negative).

    Prompts are handed out only while (docs/architecture.md §4)
        groups in flight + groups waiting <= (k + 1 + v) * batch_size − groups trained,
    where `in_flight` counts every group slot issued and not yet consumed, dropped or failed
    (leased prompts, groups waiting to be scored, being scored, waiting for the learner) and
    `trained` counts the groups consumed INTO TRAINING: consumed minus those the learner reported
    as filtered (dynamic filtering drops groups whose rewards are all equal and asks for more).
    Only trained groups move the version v on (B of them per step); counting filtered groups
    here would shrink the capacity with every filtered group while v stands still, and with a
    weak model (all rewards 0) it reaches 0 and the run deadlocks.
    """
    return max(0, (max_staleness + 1 + version) * batch_size - trained - in_flight)

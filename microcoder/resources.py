"""Ray custom resources of a pool section (`resources = {NAME = AMOUNT}` in [generator],
[executor] and [learner]): the type every pool section's `resources` field has, and its rules.

A node advertises custom resources when it joins (`ray start --resources '{"second": 4}'`); a
replica that asks for some runs only on nodes that have them free, so a pool's replicas are
pinned to those nodes. launch/run/placement.py turns them into Ray options and checks that the
cluster has enough of each.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

RAY_OWN_RESOURCES = {
    "CPU": "the section's cpus_per_* field",
    "GPU": "the section's gpus_per_* field",
    "memory": "nothing (microcoder does not reserve memory)",
    "object_store_memory": "nothing (microcoder does not reserve object store memory)",
}
"""Names Ray keeps for itself: a replica cannot ask for them as custom resources."""


def check_custom_resources(value: dict[str, float]) -> dict[str, float]:
    """Names non-empty and not one of Ray's own resources (those have their own fields);
    amounts > 0. Errors say how to fix."""
    for name, amount in value.items():
        if not name.strip():
            raise ValueError(
                f"a custom resource has an empty name (amount {amount:g}); name it as the nodes "
                "advertise it, e.g. resources = {second = 1} for nodes started with "
                """`ray start --resources '{"second": 4}'`"""
            )
        if name in RAY_OWN_RESOURCES:
            raise ValueError(
                f"'{name}' is Ray's own resource, not a custom one; set {RAY_OWN_RESOURCES[name]} "
                "instead and remove it from resources"
            )
        if not amount > 0:
            raise ValueError(
                f"resources.{name} = {amount:g}: an amount must be > 0 (each replica takes that "
                f"much of '{name}'); set it to 1, or remove '{name}' to not pin the pool"
            )
    return value


CustomResources = Annotated[dict[str, float], AfterValidator(check_custom_resources)]
"""`{NAME = AMOUNT}`: Ray custom resources each replica of a pool takes (checked above)."""

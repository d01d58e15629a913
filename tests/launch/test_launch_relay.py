"""A launch with `learner.weight_transport = "relay"` and two vLLM CPU generators sends its
weights through the relay (issue 33, item 1 in the run): each generator first syncs on its own
channel, then joins the hub's epoch, and rank 0's log shows rounds that reached both generators
(actors/weights/relay_hub.py's line per round). The run ends with exit 0 and trains every step.
tests/actors/test_relay_run.py covers the hub's cases (a member missing, added, killed) with
real actors; this is the whole product path, vLLM's workers included."""

from __future__ import annotations

import json
import re

import pytest
from launch_testing.batch import batched_launch
from launch_testing.launched import SMALL_RUN, tiny_args

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROUND = re.compile(r"relay hub: epoch (\d+) round (\d+): version (\d+) to (.+) in [\d.]+ s")
SETTINGS = [
    *SMALL_RUN,
    "max_steps=5",
    "generator.num_engines=2",
    "generator.enforce_eager=true",  # no torch.compile: the engines start sooner
    "learner.weight_transport=relay",
    "learner.checkpoint_every=0",
]

finished_run = batched_launch(__file__, "relay", tiny_args(SETTINGS))
"""The module's one launch, run beside the other batched modules' (launch_testing.batch)."""


def test_a_launch_with_the_relay_sends_versions_to_both_generators_through_it(finished_run):
    proc, run_dir = finished_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "step"] == [1, 2, 3, 4, 5]
    rank0 = (run_dir / "logs" / "learner-0.log").read_text()
    rounds = [m.groups() for m in ROUND.finditer(rank0)]
    to_both = [
        int(v)
        for _, _, v, who in rounds
        if sorted(who.split(", ")) == ["generator-0", "generator-1"]
    ]
    assert to_both, f"no relay round reached both generators; rank 0's log:\n{rank0[-3000:]}"
    assert to_both == sorted(to_both) and to_both[-1] >= 3, rounds

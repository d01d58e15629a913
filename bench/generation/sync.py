"""The weight-sync cycle of `microcoder bench generation`: gather -> broadcast -> reload -> first
token on the new weights, timed on the driver against a real learner group and generator actor.

Each cycle: the learner trains one step on a small synthetic batch (untimed; it only makes a new
version), then, timed one after another: every rank's `publish()` (the collective full-state-dict
gather; rank 0 keeps the weights and announces the version), the generator's
`maybe_sync_weights()` (asks rank 0's version, receives the broadcast, reloads the engine, resets
the prefix cache) and a one-token greedy generate. The first cycle also opens the generator's
weight channel, so it is reported apart from the median of the rest.
"""

from __future__ import annotations

import statistics
import time

from microcoder.learner.sample import SampleGroup, TrainSample


def synthetic_groups(version: int, groups: int = 2, size: int = 4, tokens: int = 16) -> list:
    """A small batch with reward signal (alternating 0/1) at policy `version`."""

    def sample(g: int, i: int) -> TrainSample:
        return TrainSample(
            prompt_ids=[1 + g, 2, 3, 4],
            response_ids=[(5 + 7 * i + t) % 4000 for t in range(tokens)],
            behaviour_logprobs=[-8.0] * tokens,
            temperature=1.0,
            reward=float(i % 2),
            truncated=False,
            verdict="AC" if i % 2 else "WA",
            policy_version=version,
        )

    return [
        SampleGroup(f"sync-{version}-{g}", [sample(g, i) for i in range(size)])
        for g in range(groups)
    ]


def one_cycle(ray, group, gen, prompt: str) -> dict[str, float]:
    """Train a step (untimed), then time publish -> pull -> first token."""
    ray.get([r.train.remote(synthetic_groups(group.version)) for r in group.ranks])
    t0 = time.perf_counter()
    gather = ray.get([r.publish.remote() for r in group.ranks])[0]
    t1 = time.perf_counter()
    if not ray.get(gen.maybe_sync_weights.remote()):
        raise RuntimeError("bench: the generator did not pull the learner's new weights")
    t2 = time.perf_counter()
    first = ray.get(gen.greedy.remote([prompt], 1))
    t3 = time.perf_counter()
    if len(first[0]) != 1:
        raise RuntimeError(f"bench: expected one token on the new weights, got {first}")
    group.version = ray.get(group.rank0.latest_version.remote())
    last = ray.get(gen.stats.remote())["last_sync"]
    return {
        "cycle_s": t3 - t0,
        "publish_s": t1 - t0,
        "gather_s": gather["gather_s"],
        "pull_s": t2 - t1,
        "send_s": last["send_s"],
        "receive_s": last["receive_s"],
        "reload_s": last["reload_s"],
        "reset_prefix_cache_s": last["reset_prefix_cache_s"],
        "first_token_s": t3 - t2,
        "bytes": float(last["bytes"]),
    }


def measure_sync_cycles(ray, group, gen, cfg, cycles: int, prompt: str) -> dict:
    """`cycles` timed cycles after a first one (which opens the channel); medians."""
    first = one_cycle(ray, group, gen, prompt)
    runs = [one_cycle(ray, group, gen, prompt) for _ in range(max(1, cycles))]
    parts = [k for k in runs[0] if k not in ("cycle_s", "bytes")]
    return {
        "sync_cycle_s": statistics.median(r["cycle_s"] for r in runs),
        "sync_first_cycle_s": first["cycle_s"],
        "sync_cycles": len(runs),
        "sync_bytes": runs[0]["bytes"],
        "sync_parts_s": {k: statistics.median(r[k] for r in runs) for k in parts},
        "sync_runs": runs,
    }

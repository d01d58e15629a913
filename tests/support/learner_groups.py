"""Seeded sample groups for the learner's guard tests (tests/learner/test_nonfinite_guard.py,
test_off_policy_guard.py), outside the product. Importable as `learner_groups` because
tests/conftest.py puts tests/support on sys.path."""

from __future__ import annotations

import math
import random

from microcoder.learner.sample import SampleGroup, TrainSample


def mixed_groups(
    step: int, versions=(0, 0), temperature: float = 1.0, nan: bool = False
) -> list[SampleGroup]:
    """Two groups of four with mixed rewards (0, 1, 0, 1) and 3-12 random response tokens, seeded
    by `step`. Group k is sampled at policy version versions[k]; sample 2 of group 0 at
    `temperature`; with `nan`, sample 1 of group 0 has a NaN reward."""
    rng = random.Random(step)
    out = []
    for k in range(2):
        samples = []
        for i in range(4):
            resp = [rng.randrange(250) for _ in range(rng.randint(3, 12))]
            logp = [-rng.uniform(3.0, 6.0) for _ in resp]
            t = temperature if (k, i) == (0, 2) else 1.0
            reward = math.nan if nan and (k, i) == (0, 1) else float(i % 2)
            samples.append(TrainSample([1, 2, 3], resp, logp, t, reward, False, "WA", versions[k]))
        out.append(SampleGroup(f"{step}-{k}", samples))
    return out

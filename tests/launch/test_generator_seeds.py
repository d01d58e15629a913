"""launch/run/actor_settings.py: every generator replica samples with its own engine seed, derived
from the run's seed and its index, the same on every launch (issue 33, fault 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from microcoder.launch.config import load_config
from microcoder.launch.run.actor_settings import generator_seed, generator_settings, replica_index

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.toml"


def test_each_replica_of_a_run_gets_its_own_seed_and_generator_0_keeps_the_runs():
    cfg = load_config(TINY, ["seed=7"])
    seeds = [generator_settings(cfg, i).seed for i in range(64)]
    assert seeds[0] == 7
    assert len(set(seeds)) == 64
    assert seeds == [generator_settings(cfg, i).seed for i in range(64)]  # deterministic
    assert seeds[3] == generator_seed(7, 3) == 7 + 3 * 65536


def test_no_two_runs_of_small_seeds_share_a_generators_stream():
    pairs = [(s, i) for s in range(8) for i in range(8)]
    assert len({generator_seed(s, i) for s, i in pairs}) == len(pairs)


def test_seeds_stay_in_the_range_the_engine_accepts():
    assert 0 <= generator_seed(2**32 - 1, 5) < 2**32
    with pytest.raises(ValueError, match="negative"):
        generator_seed(0, -1)


def test_the_index_comes_from_the_replica_name_the_pool_gives():
    assert replica_index("generator-12") == 12
    with pytest.raises(ValueError, match="generator-x"):
        replica_index("generator-x")

"""The prompt order the buffer hands out follows the run's `seed` unless `data.shuffle_seed` is
set (actors/buffer_host.py: prompt_source, what the buffer actor serves), and a resumed run,
which reloads its saved config.toml, continues the same order."""

from __future__ import annotations

import pytest

from microcoder.actors.buffer_host import open_prompt_table, prompt_source
from microcoder.launch.config import load_config

PROMPTS = [(f"p{i}", f"problem {i}") for i in range(50)]


def source_of(cfg):
    return prompt_source(cfg.data, cfg.seed, open_prompt_table(PROMPTS, cfg.data))


def first_prompts(overrides: list[str], n: int = 8) -> list[str]:
    cfg = load_config(None, overrides)
    source = source_of(cfg)
    return [source.next().problem_id for _ in range(n)]


def test_two_seeds_hand_out_different_first_prompts():
    assert first_prompts(["seed=0"])[0] != first_prompts(["seed=1"])[0]
    assert first_prompts(["seed=1"]) != first_prompts(["seed=2"])


def test_an_explicit_shuffle_seed_gives_every_seed_the_same_order():
    pinned = [first_prompts([f"seed={s}", "data.shuffle_seed=7"]) for s in (0, 1, 2)]
    assert pinned[0] == pinned[1] == pinned[2]


def test_seed_0_keeps_the_order_of_the_old_default_shuffle_seed_0():
    """Runs at the default seed (the tiny recipe, tests/fixtures, the learning bench's seed 0)
    see the order they saw when shuffle_seed defaulted to 0."""
    assert first_prompts(["seed=0"]) == first_prompts(["seed=5", "data.shuffle_seed=0"])


def test_a_resumed_run_continues_the_same_order(tmp_path):
    """--resume reads RUN_DIR/config.toml: the unset shuffle_seed stays unset and the seed is
    the run's, so the snapshot's cursor lands in the same permutation."""
    cfg = load_config(None, ["seed=3"])
    whole = source_of(cfg)
    order = [whole.next().problem_id for _ in range(80)]  # into the second epoch
    saved = tmp_path / "config.toml"
    saved.write_text(cfg.to_toml())
    source = source_of(cfg)
    for _ in range(30):
        source.next()
    cursor = source.state_dict()
    again = load_config(saved)
    assert again.data.shuffle_seed is None and again.seed == 3
    resumed = source_of(again)
    resumed.load_state_dict(cursor)
    assert [resumed.next().problem_id for _ in range(50)] == order[30:]


def test_a_resume_under_another_order_seed_is_refused_naming_the_fix():
    """`--resume RUN_DIR --set seed=N` would walk the saved cursor through another order."""
    cfg = load_config(None, ["seed=3"])
    cursor = source_of(cfg).state_dict()
    other = load_config(None, ["seed=4"])
    with pytest.raises(ValueError, match="data.shuffle_seed = 3 to keep the order"):
        source_of(other).load_state_dict(cursor)
    pinned = load_config(None, ["seed=4", "data.shuffle_seed=3"])
    source_of(pinned).load_state_dict(cursor)  # same order: fine

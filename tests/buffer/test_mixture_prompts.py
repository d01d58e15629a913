"""Weighted mixtures of prompt sources (buffer/prompts.py MixturePrompts): draws follow the
weights, each source counts its own epochs and leaves after `epochs`, the cursor resumes
exactly, one source keeps the order of old, and a million rows cost megabytes."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from microcoder.buffer.prompts import DatasetPrompts, ListPromptTable, MixturePrompts, PromptItem


def table(**sizes: int) -> ListPromptTable:
    return ListPromptTable(
        {name: [(f"{name}{i}", f"text {name}{i}") for i in range(n)] for name, n in sizes.items()}
    )


def drain(src, limit=100_000):
    out = []
    while len(out) < limit and (item := src.next()) is not None:
        out.append(item)
    return out


def test_draws_follow_the_weights_within_a_binomial_bound():
    src = MixturePrompts(table(a=37, b=11), [0.8, 0.2], seed=4)
    n = 1000
    from_a = sum(src.next().source == "a" for _ in range(n))
    sd = math.sqrt(n * 0.8 * 0.2)
    assert abs(from_a - 0.8 * n) < 4 * sd, from_a


def test_items_carry_their_source_and_come_from_it():
    src = MixturePrompts(table(a=5, b=5), [1, 1], seed=0)
    for item in drain(src, 200):
        assert item.problem_id.startswith(item.source)
        assert item.prompt == f"text {item.problem_id}"


def test_each_source_counts_its_own_epochs():
    """A small source with the same weight as a large one goes round many more times; every
    epoch of a source is a permutation of it."""
    src = MixturePrompts(table(big=50, small=5), [1, 1], seed=2)
    items = drain(src, 400)
    small = [i for i in items if i.source == "small"]
    big = [i for i in items if i.source == "big"]
    assert max(i.epoch for i in small) >= 5 * max(i.epoch for i in big)
    full = len(small) // 5
    for e in range(full):
        assert sorted(i.problem_id for i in small if i.epoch == e) == [
            f"small{k}" for k in range(5)
        ]
    assert src.source_epochs()["small"] == small[-1].epoch


def test_with_epochs_a_finished_source_leaves_and_the_mixture_ends():
    src = MixturePrompts(table(a=20, b=4), [0.5, 0.5], epochs=2, seed=1)
    items = drain(src)
    assert src.next() is None
    for name, n in (("a", 20), ("b", 4)):
        mine = [i for i in items if i.source == name]
        assert len(mine) == 2 * n
        for e in range(2):
            assert sorted(i.problem_id for i in mine if i.epoch == e) == sorted(
                f"{name}{k}" for k in range(n)
            )
    # b (8 prompts) finishes long before a (40): the tail is all a
    assert all(i.source == "a" for i in items[-10:])


def test_a_snapshot_mid_epoch_with_returned_items_continues_exactly():
    whole = drain(MixturePrompts(table(a=7, b=3), [0.6, 0.4], epochs=3, seed=9))
    src = MixturePrompts(table(a=7, b=3), [0.6, 0.4], epochs=3, seed=9)
    head = [src.next() for _ in range(13)]
    src.push_front(head[-1])
    src.push_front(head[-2])
    resumed = MixturePrompts(table(a=7, b=3), [0.6, 0.4], epochs=3, seed=9)
    resumed.load_state_dict(src.state_dict())
    rest = drain(resumed)
    assert rest[:2] == head[-2:]  # returned items keep their source and epoch
    assert head[:-2] + rest == whole


@pytest.mark.parametrize(
    "other, match",
    [
        (MixturePrompts(table(a=7, c=3), [0.6, 0.4], seed=9), "resume with the same data.sources"),
        (MixturePrompts(table(a=7, b=4), [0.6, 0.4], seed=9), "source 'b' differ"),
        (MixturePrompts(table(a=7, b=3), [0.5, 0.5], seed=9), "same data.sources weights"),
        (MixturePrompts(table(a=7, b=3), [0.6, 0.4], seed=8), "data.shuffle_seed = 9"),
    ],
)
def test_a_cursor_of_another_mixture_is_refused_naming_the_fix(other, match):
    state = MixturePrompts(table(a=7, b=3), [0.6, 0.4], seed=9).state_dict()
    with pytest.raises(ValueError, match=match):
        other.load_state_dict(state)


def old_order(ids, seed, epochs):
    """DatasetPrompts' order before mixtures existed."""
    out = []
    for e in range(epochs):
        order = list(range(len(ids)))
        random.Random(seed * 1_000_003 + e).shuffle(order)
        out += [(ids[k], e) for k in order]
    return out


@pytest.mark.parametrize("seed", [0, 3, 12345])
def test_one_source_hands_out_the_order_of_old(seed):
    ids = [f"p{i}" for i in range(23)]
    src = MixturePrompts(ListPromptTable({"only": [(p, "") for p in ids]}), [0.3], 3, seed)
    assert [(i.problem_id, i.epoch) for i in drain(src)] == old_order(ids, seed, 3)
    assert [(i.problem_id, i.epoch) for i in drain(DatasetPrompts(ids, 3, seed))] == old_order(
        ids, seed, 3
    )


def test_a_one_source_cursor_written_before_mixtures_resumes():
    ids = [f"p{i}" for i in range(9)]
    whole = old_order(ids, 5, 3)
    old_cursor = {
        "epoch": 1,
        "index": 4,
        "fingerprint": ListPromptTable({"x": [(p, "") for p in ids]}).fingerprint(0),
        "seed": 5,
        "returned": [["p7", "", 1]],
    }
    src = MixturePrompts(ListPromptTable({"synthetic": [(p, "") for p in ids]}), [1], 3, 5)
    src.load_state_dict(old_cursor)
    assert src.next() == PromptItem("p7", "", 1, "synthetic")
    assert [(i.problem_id, i.epoch) for i in drain(src)] == whole[9 + 4 :]
    two = MixturePrompts(table(a=9, b=2), [1, 1], seed=5)
    with pytest.raises(ValueError, match="one-source cursor"):
        two.load_state_dict(old_cursor)


class CountingTable:
    """A million-row source that holds no rows (what the store does: read on demand)."""

    def __init__(self, n: int):
        self.n = n

    def source_names(self):
        return ["big", "small"]

    def count(self, source):
        return self.n if source == 0 else 10

    def item(self, source, index):
        return f"{source}-{index}", ""

    def fingerprint(self, source):
        return source


def test_a_million_rows_cost_megabytes_not_a_python_list():
    src = MixturePrompts(CountingTable(10**6), [0.9, 0.1], seed=1)
    big = [i.problem_id for i in (src.next() for _ in range(2000)) if i.source == "big"]
    assert len(set(big)) == len(big) > 1500  # a permutation of the million, not repeats
    arrays = [held[1] for held in src._orders if held is not None]
    assert arrays and all(isinstance(a, np.ndarray) for a in arrays)
    assert sum(a.nbytes for a in arrays) <= 4 * (10**6 + 10)  # int32: 4 bytes a row
    lists = [v for v in vars(src).values() if isinstance(v, list) and len(v) > 1000]
    assert not lists


def test_empty_sources_and_mismatched_weights_are_refused():
    with pytest.raises(ValueError, match="'b' has no training prompts"):
        MixturePrompts(table(a=3, b=0), [1, 1])
    with pytest.raises(ValueError, match="2 prompt sources"):
        MixturePrompts(table(a=3, b=3), [1])

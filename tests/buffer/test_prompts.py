"""The prompt source: epochs, seeded order, a cursor that resumes exactly, returned prompts."""

from __future__ import annotations

import pytest

from microcoder.buffer.prompts import DatasetPrompts, PromptItem
from microcoder.data.problem import Problem


def drain(src, limit=1000):
    out = []
    while (item := src.next()) is not None and len(out) < limit:
        out.append(item)
    return out


def test_finite_epochs_yield_every_problem_once_per_epoch():
    items = drain(DatasetPrompts([f"p{i}" for i in range(5)], epochs=3, seed=1))
    assert len(items) == 15
    for e in range(3):
        assert sorted(i.problem_id for i in items if i.epoch == e) == [f"p{i}" for i in range(5)]


def test_same_seed_same_order_and_epochs_differ():
    a = drain(DatasetPrompts([f"p{i}" for i in range(20)], epochs=2, seed=3))
    b = drain(DatasetPrompts([f"p{i}" for i in range(20)], epochs=2, seed=3))
    assert a == b
    assert [i.problem_id for i in a[:20]] != [i.problem_id for i in a[20:]]


def test_saved_cursor_continues_exactly():
    ids = [f"p{i}" for i in range(7)]
    whole = drain(DatasetPrompts(ids, epochs=3, seed=5))
    src = DatasetPrompts(ids, epochs=3, seed=5)
    head = [src.next() for _ in range(9)]
    src.push_front(head[-1])
    resumed = DatasetPrompts(ids, epochs=3, seed=5)
    resumed.load_state_dict(src.state_dict())
    assert head[:-1] + drain(resumed) == whole


def test_returned_prompt_comes_out_next():
    src = DatasetPrompts(["a", "b", "c"], shuffle=False)
    first = src.next()
    src.push_front(first)
    assert src.next() == first


def test_problem_records_give_id_and_prompt():
    p = Problem(
        id="x1", kind="stdin", prompt="Add two numbers.", tests=[{"input": "", "output": ""}]
    )
    assert DatasetPrompts([p]).next() == PromptItem("x1", "Add two numbers.", 0)


def test_cursor_of_another_dataset_is_refused():
    state = DatasetPrompts(["a", "b"]).state_dict()
    with pytest.raises(ValueError, match="different dataset"):
        DatasetPrompts(["a", "c"]).load_state_dict(state)


def test_empty_source_is_refused():
    with pytest.raises(ValueError, match="empty"):
        DatasetPrompts([])

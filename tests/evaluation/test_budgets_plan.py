"""One generation at several budgets; what is left to generate on --resume; call sizes."""

from __future__ import annotations

import pytest

from microcoder.data.problem import Problem
from microcoder.evaluation.budgets import budget_views, check_budgets
from microcoder.evaluation.plan import Todo, next_chunk, plan_samples


def decode(ids):
    return "".join(chr(ord("a") + i) for i in ids)


def test_a_long_response_is_cut_at_each_smaller_budget():
    views = budget_views([0, 1, 2, 3, 4], "abcde", "stop", [2, 5, 4], decode)
    assert [(v["max_tokens"], v["text"], v["tokens"], v["finish_reason"]) for v in views] == [
        (2, "ab", 2, "length"),
        (4, "abcd", 4, "length"),
        (5, "abcde", 5, "stop"),
    ]


def test_a_response_within_the_budget_is_unchanged():
    views = budget_views([0, 1], "engine text", "stop", [4, 8], decode)
    assert all(v["text"] == "engine text" and not v["cut"] for v in views)


def test_budgets_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        check_budgets([0, 64])
    assert check_budgets([8192, 4096, 4096]) == [4096, 8192]


def problem(pid):
    return Problem(pid, "stdin", "p", [{"input": "", "output": ""}])


def test_plan_skips_judged_keys_and_keeps_missing_budgets():
    every = {(pid, i, budget) for pid in "ab" for i in (0, 1) for budget in (64, 128)}
    done = every - {("a", 1, 64)}  # all judged but one key
    todos = plan_samples([problem("a"), problem("b")], 2, [64, 128], done)
    assert len(todos) == 1 and todos[0].problem.id == "a"
    assert todos[0].sample_indices == [1] and todos[0].budgets == {1: [64]}


def test_chunks_shrink_towards_the_end():
    todos = [Todo(problem(str(i)), [0, 1, 2, 3], {}) for i in range(10)]  # 40 sequences
    sizes, start = [], 0
    while start < len(todos):
        end = next_chunk(todos, start, per_call=16, parallel=2)
        sizes.append(end - start)
        start = end
    assert sizes[0] == 4 and sizes[-1] == 1 and sum(sizes) == 10


def test_a_chunk_takes_at_least_one_problem():
    todos = [Todo(problem("big"), list(range(50)), {})]
    assert next_chunk(todos, 0, per_call=8, parallel=1) == 1

import subprocess
import sys
from collections import Counter

import pytest

from microcoder.data.synthetic.ops import FAMILIES, OPS
from microcoder.data.synthetic.tasks import (
    all_combos,
    generate_tasks,
    run_solution,
    split_of,
    tokenizer_corpus,
)


def test_same_seed_gives_identical_tasks():
    assert generate_tasks(7, n=40) == generate_tasks(7, n=40)


def test_different_seeds_give_different_tests():
    a, b = generate_tasks(1, n=30), generate_tasks(2, n=30)
    assert [p.tests for p in a] != [p.tests for p in b]


def test_smaller_n_is_a_prefix():
    assert generate_tasks(5, n=10) == generate_tasks(5, n=25)[:10]


def test_heldout_shares_no_solution_or_prompt_with_train(train, heldout):
    assert heldout
    assert not {p.meta["solution"] for p in train} & {p.meta["solution"] for p in heldout}
    assert not {p.prompt for p in train} & {p.prompt for p in heldout}


def test_split_is_a_stable_hash_of_the_combination():
    keys = [c.key for c in all_combos()]
    share = sum(split_of(k) == "heldout" for k in set(keys)) / len(set(keys))
    assert 0.10 < share < 0.20
    assert split_of("two.add_c|6|u,v") == split_of("two.add_c|6|u,v")
    # pinned so that a change to the hash (which would leak held-out tasks into training) fails
    assert [split_of(f"two.add_c|{c}|u,v") for c in range(2, 10)] == PINNED


PINNED = ["train"] * 7 + ["heldout"]


def test_every_canonical_solution_reproduces_its_outputs(train, heldout):
    for p in train + heldout:
        for t in p.tests:
            assert run_solution(p.meta["solution"], t["input"]) == t["output"], p.id


def test_canonical_solutions_pass_in_a_real_python_process(train):
    sample = [next(p for p in train if p.meta["family"] == f) for f in FAMILIES]
    for p in sample:
        for t in p.tests:
            run = subprocess.run(
                [sys.executable, "-c", p.meta["solution"]],
                input=t["input"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            assert run.stdout == t["output"], p.id


def test_tasks_have_enough_discriminating_tests(train, heldout):
    for p in train + heldout:
        assert p.kind == "stdin" and len(p.tests) >= 4, p.id
        assert len({t["output"] for t in p.tests}) >= 2, p.id


def test_variety_of_families_operations_and_phrasings(train):
    ops = Counter((p.meta["family"], p.meta["op"]) for p in train)
    assert set(FAMILIES) == {f for f, _ in ops}
    assert len(ops) == len(OPS) >= 30
    assert all(n >= 5 for n in Counter(f for f, _ in ops).values())
    assert len({p.prompt for p in train}) == len(train) > 3000
    assert len({p.meta["solution"] for p in train}) > 1000


def test_prompts_and_solutions_are_short_and_uniform(train):
    for p in train:
        lines = p.meta["solution"].split("\n")
        assert 1 <= len(lines) <= 3 and lines[-1].startswith("print(")
        assert len(p.prompt) + len(p.meta["solution"]) <= 160


def test_tokenizer_corpus_has_train_text_only(heldout):
    corpus = set(tokenizer_corpus())
    assert "u, v = map(int, input().split())\nprint(u + v + 6)" in corpus
    assert not corpus & {p.meta["solution"] for p in heldout}


def test_asking_for_more_tasks_than_exist_says_how_many():
    with pytest.raises(ValueError, match="has \\d+ tasks"):
        generate_tasks(0, "heldout", n=10**6)

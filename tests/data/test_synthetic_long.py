"""The long-answer synthetic family (data/synthetic/long_answers.py) and its selection by data.source."""

import json
from pathlib import Path

import pytest

from microcoder.data.config import DataConfig, PromptConfig
from microcoder.data.problem import validate_problem
from microcoder.data.sources import SYNTHETIC_VARIANTS, load_run_problems, synthetic_variant
from microcoder.data.synthetic.long_answers import (
    PARTS,
    all_combos,
    generate_tasks,
    tokenizer_corpus,
)
from microcoder.data.synthetic.ops import FAMILIES
from microcoder.data.synthetic.tasks import run_solution, split_of

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "compare-long.toml"
MIN_SHARE_OF_CAP = 0.75
"""Every canonical reply (fenced, with eos) is at least this share of the recipe's cap."""


@pytest.fixture(scope="module")
def long_tokenizer(tmp_path_factory):
    """The tokenizer the variant's warm start builds (its corpus, its vocabulary budget)."""
    from transformers import AutoTokenizer

    from microcoder.learner.models.tiny_model import train_tokenizer
    from microcoder.learner.warmstart.build import warmstart_corpus
    from microcoder.learner.warmstart.config import WarmStartConfig

    corpus = warmstart_corpus(PromptConfig(), "synthetic-long")
    out = tmp_path_factory.mktemp("long-tokenizer")
    train_tokenizer(corpus, WarmStartConfig().vocab_size).save_pretrained(out)
    return AutoTokenizer.from_pretrained(out)


def test_data_source_synthetic_long_selects_the_variant():
    problems = load_run_problems(DataConfig(source="synthetic-long"), 0, "heldout")
    assert problems == generate_tasks(0, "heldout")
    assert synthetic_variant("synthetic-long").generate_tasks is generate_tasks


def test_an_unknown_synthetic_family_names_the_registered_ones():
    with pytest.raises(ValueError, match="synthetic-long"):
        synthetic_variant("synthetic-huge")


def test_tasks_are_valid_problems(train, heldout):
    for p in train[:200] + heldout[:50]:
        assert validate_problem(json.loads(p.to_json())) == p


def test_same_seed_gives_identical_tasks_and_a_smaller_n_is_a_prefix():
    assert generate_tasks(3, n=20) == generate_tasks(3, n=40)[:20]
    assert generate_tasks(3, n=20) == generate_tasks(3, n=20)


def test_each_task_chains_parts_from_distinct_families_with_distinct_names():
    for combo in all_combos()[:500]:
        assert len({p.op.family for p in combo.parts}) == PARTS
        names = [n for p in combo.parts for n in p.names]
        assert len(names) == len(set(names)), combo.task_id


def test_every_canonical_solution_reproduces_its_outputs(train, heldout):
    for p in train + heldout:
        for t in p.tests:
            assert run_solution(p.meta["solution"], t["input"]) == t["output"], p.id


def test_outputs_have_one_line_per_part_and_tests_discriminate(train):
    for p in train:
        assert all(t["output"].count("\n") == PARTS for t in p.tests), p.id
        assert len({t["output"] for t in p.tests}) > 1, p.id


def test_canonical_solutions_pass_through_the_sandboxed_judge(train, heldout):
    from microcoder.learner.warmstart.examples import response_text
    from microcoder.sandbox import JudgePool, extract_code

    sample = train[:12] + heldout[:4]
    with JudgePool(workers=2) as pool:
        verdicts = pool.judge_many(
            (p, extract_code(response_text(p.meta["solution"]))) for p in sample
        )
    assert [v.reward for v in verdicts] == [1.0] * len(sample)


def test_split_is_the_short_familys_hash_rule(train, heldout):
    keys = {c.key for c in all_combos()}
    share = sum(split_of(k) == "heldout" for k in keys) / len(keys)
    assert 0.10 < share < 0.20
    for p in train[:300]:
        assert p.meta["split"] == "train" == split_of(" + ".join(p.meta["parts"]))
    for p in heldout:
        assert p.meta["split"] == "heldout" == split_of(" + ".join(p.meta["parts"]))


def test_heldout_shares_no_solution_or_prompt_with_train(train, heldout):
    assert len(heldout) > 500
    assert not {p.meta["solution"] for p in train} & {p.meta["solution"] for p in heldout}
    assert not {p.prompt for p in train} & {p.prompt for p in heldout}


def test_every_input_family_appears_in_every_position(train):
    firsts = {p.meta["parts"][0].split(".")[0] for p in train}
    lasts = {p.meta["parts"][-1].split(".")[0] for p in train}
    assert firsts == lasts == set(FAMILIES)


def test_tokenizer_corpus_has_train_text_only(heldout):
    corpus = set(tokenizer_corpus())
    assert not any(p.prompt in corpus or p.meta["solution"] in corpus for p in heldout)


def test_canonical_replies_fill_most_of_the_recipes_cap_and_fit_in_it(heldout, long_tokenizer):
    from microcoder.launch.config import load_config
    from microcoder.learner.warmstart.examples import response_text

    cap = load_config(RECIPE).generator.max_response_tokens
    lengths = [
        len(long_tokenizer(response_text(p.meta["solution"]))["input_ids"]) + 1  # + eos
        for p in heldout
    ]
    assert min(lengths) >= MIN_SHARE_OF_CAP * cap
    assert max(lengths) <= cap


def test_the_synthetic_families_are_registered_once():
    assert set(SYNTHETIC_VARIANTS) == {"synthetic", "synthetic-long"}

"""SFT examples: prompt rendered like the generator's, loss only on the fenced solution + eos."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from microcoder.data.config import PromptConfig
from microcoder.data.prompting.render import PromptRenderer
from microcoder.data.synthetic.tasks import generate_tasks
from microcoder.learner.warmstart.examples import (
    IGNORE,
    batch_indices,
    collate,
    encode_example,
    response_text,
)

SYSTEM = "Reply with one ```python code block."


@pytest.fixture(scope="module")
def tok(small_model):
    return AutoTokenizer.from_pretrained(small_model)


@pytest.fixture(scope="module")
def renderer(tok):
    return PromptRenderer(tok, PromptConfig(system={"stdin": SYSTEM}))


@pytest.fixture(scope="module")
def problems():
    return generate_tasks(0, "train", 3)


def test_prompt_is_exactly_the_generators_rendering(renderer, problems):
    ex = encode_example(renderer, problems[0])
    assert list(ex.prompt_ids) == renderer.encode_text(renderer.text(problems[0]))
    assert renderer.messages(problems[0])[0]["content"] == SYSTEM


def test_response_is_the_fenced_solution_ending_with_eos(tok, renderer, problems):
    ex = encode_example(renderer, problems[0])
    assert ex.response_ids[-1] == tok.eos_token_id
    text = tok.decode(list(ex.response_ids[:-1]))
    assert text == response_text(problems[0].meta["solution"])
    assert text.startswith("```python\n") and text.endswith("\n```")


def test_loss_mask_covers_exactly_the_solution_tokens(tok, renderer, problems):
    examples = [encode_example(renderer, p) for p in problems]
    batch = collate(examples, tok.pad_token_id)
    for row, ex in enumerate(examples):
        labels = batch["labels"][row].tolist()
        supervised = [t for t, lab in enumerate(labels) if lab != IGNORE]
        p, n = len(ex.prompt_ids), len(ex.input_ids)
        assert supervised == list(range(p, n))
        assert [labels[t] for t in supervised] == list(ex.response_ids)
        assert batch["input_ids"][row, :n].tolist() == ex.input_ids
        assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (len(labels) - n)


def test_problem_without_solution_is_refused_with_the_fix(renderer, problems):
    bare = problems[0].__class__(id="x", kind="stdin", prompt="Print 1.", tests=[])
    with pytest.raises(ValueError, match="meta\\['solution'\\]"):
        encode_example(renderer, bare)


def test_batches_depend_only_on_seed_and_step():
    assert batch_indices(3, 7, 100, 32) == batch_indices(3, 7, 100, 32)
    assert batch_indices(3, 7, 100, 32) != batch_indices(4, 7, 100, 32)
    assert batch_indices(3, 7, 100, 32) != batch_indices(3, 8, 100, 32)


def test_one_epoch_of_batches_visits_every_example_once():
    seen = [i for step in range(1, 11) for i in batch_indices(0, step, 50, 5)]
    assert sorted(seen) == list(range(50))

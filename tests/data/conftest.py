from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture
def fixture_path():
    """Path of a loader fixture file by name (tests/fixtures/data/<name>)."""
    return lambda name: FIXTURES / name


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory):
    """The tiny model's tokenizer kind (byte-level BPE, ChatML template) on a small corpus,
    saved and reloaded as a run loads it."""
    from family_models import tokenizer_model
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_model(tmp_path_factory.mktemp("tokenizer")))


@pytest.fixture(scope="session")
def mixed_problems():
    """stdin, functional (with and without starter code) and assert (HumanEval-style and
    LeetCode-style) problems, by id."""
    from microcoder.data.formats.loaders import load_problems

    return {p.id: p for p in load_problems(FIXTURES / "prompts_mixed.jsonl")}


@pytest.fixture(scope="module")
def train(request):
    """The train split of seed 0 of the synthetic family the test module tests (its module's
    `generate_tasks`: data/synthetic's short or long tasks)."""
    return request.module.generate_tasks(0, "train")


@pytest.fixture(scope="module")
def heldout(request):
    """The held-out split of seed 0 of the test module's synthetic family (as `train`)."""
    return request.module.generate_tasks(0, "heldout")

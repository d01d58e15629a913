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
    from transformers import AutoTokenizer

    from microcoder.learner.tiny_model import build_tiny_model

    corpus = ["def add(a, b):\n    return a + b\n\nclass Solution:\n    pass\n"] * 20
    out = tmp_path_factory.mktemp("tokenizer")
    build_tiny_model(
        out,
        corpus=corpus,
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    return AutoTokenizer.from_pretrained(out)


@pytest.fixture(scope="session")
def mixed_problems():
    """stdin, functional (with and without starter code) and assert (HumanEval-style and
    LeetCode-style) problems, by id."""
    from microcoder.data.loaders import load_problems

    return {p.id: p for p in load_problems(FIXTURES / "prompts_mixed.jsonl")}

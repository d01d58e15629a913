"""qwen3_moe across learner ranks: a tiny qwen3_moe (tests/support/family_models.py) at world 2
(spawned gloo ranks, one launch) against world 1 (in this process): the same log-probs, the same
weights after one step, the checkpoint's names published, and each rank reading only the
checkpoint rows it keeps (about half the bytes of world 1, experts included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from family_models import build_family
from learner_ranks import spawn_ranks
from moe_worker import measure
from safetensors import safe_open
from safetensors.torch import load_file

from microcoder.learner.models import logprob_check as lc

WORKER = Path(__file__).with_name("moe_worker.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(folder, world-1 record, world-1 weights, [world-2 records], world-2 weights)."""
    root = tmp_path_factory.mktemp("moe-ranks")
    folder = build_family("qwen3_moe", root / "model")
    one = measure(folder, root / "w1")
    spawn_ranks(2, [str(WORKER), str(folder), str(root / "w2")])
    two = [json.loads((root / "w2" / f"rank{r}.json").read_text()) for r in range(2)]
    return (
        folder,
        one,
        load_file(root / "w1" / "weights.safetensors"),
        two,
        load_file(root / "w2" / "weights.safetensors"),
    )


def _checkpoint_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    out = {}
    for file in folder.glob("*.safetensors"):
        with safe_open(file, framework="pt") as f:
            out |= {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    return out


@pytest.mark.slow
def test_moe_at_world_2_equals_world_1_and_publishes_the_checkpoints_names(runs):
    folder, one, weights1, two, weights2 = runs
    # each rank scores its share of the sequences (the other's come back empty)
    shares = list(zip(two[0]["logprobs"], two[1]["logprobs"], strict=True))
    assert all(bool(a) != bool(b) for a, b in shares)
    assert lc.max_abs_diff([a or b for a, b in shares], one["logprobs"]) <= 1e-5
    assert two[0]["metrics"]["loss"] == pytest.approx(one["metrics"]["loss"], rel=1e-5)
    assert weights2.keys() == weights1.keys()
    before = load_file(folder / "model.safetensors")
    moved = max((weights1[k] - t).abs().max().item() for k, t in before.items())
    assert moved > 1e-5  # the step changed the weights by more than the tolerance below
    for k, t in weights1.items():
        torch.testing.assert_close(weights2[k], t, atol=1e-6, rtol=0, msg=k)
    want = _checkpoint_shapes(folder)
    assert {k: tuple(v.shape) for k, v in weights2.items()} == want
    assert any(".mlp.experts.3.down_proj.weight" in k for k in want)  # unfused expert names


@pytest.mark.slow
def test_each_rank_at_world_2_reads_about_half_the_checkpoint_bytes(runs):
    """Every tensor's rows are split in two (dims here are even), the experts' sources included:
    a rank reads half of what world 1 reads, within 2%; reading every expert whole on each rank
    (the loader before this) reads about 72%."""
    _, one, _, two, _ = runs
    total = one["bytes_read"]
    assert total == sum(
        t.numel() * t.element_size() for t in load_file(runs[0] / "model.safetensors").values()
    )
    for record in two:
        assert abs(record["bytes_read"] - total / 2) <= 0.02 * total

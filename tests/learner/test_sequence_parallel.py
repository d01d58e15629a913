"""Sequence parallelism (learner/sequence_parallel.py): the split of a packed micro-batch, the
refusals, and 2 gloo ranks with learner.sequence_parallel = 2 training one 512-token packed
batch exactly as 1 rank does, each rank's layers seeing half the tokens."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from learner_ranks import spawn_ranks
from safetensors.torch import load_file

from microcoder.learner.packing import collate
from microcoder.learner.sequence_parallel import SequenceParallel, model_errors, shard

WORKER = Path(__file__).with_name("sp_worker.py")


def packed(lengths: list[int], prompt: int = 3, loss_masks=None):
    """A packed micro-batch of sequences of `lengths` tokens, each with a `prompt`-token prompt
    (`loss_masks`: each response's model tokens, as a multi-turn trajectory has)."""
    seqs = [torch.arange(n) + 100 * k for k, n in enumerate(lengths)]
    batch = SimpleNamespace(
        input_ids=seqs,
        prompt_lens=torch.tensor([prompt] * len(seqs)),
        response_lens=torch.tensor([n - prompt for n in lengths]),
        temperatures=torch.ones(len(seqs)),
        behaviour_logprobs=[torch.full((n - prompt,), -1.0) for n in lengths],
        advantages=torch.ones(len(seqs)),
        loss_masks=loss_masks,
    )
    return collate(batch, range(len(seqs)), torch.ones(len(seqs), dtype=torch.float64), True)


def slices(mb, n: int):
    return [shard(mb, SequenceParallel(n, r, 0, 1)) for r in range(n)]


def test_slices_tile_the_row_padded_to_a_multiple_of_n():
    mb = packed([9, 6])  # 15 tokens -> 16 over 2 ranks
    parts = slices(mb, 2)
    ids = torch.cat([p.input_ids for p in parts], dim=1)
    assert [p.input_ids.shape[1] for p in parts] == [8, 8]
    assert torch.equal(ids[:, :15], mb.input_ids)
    pos = torch.cat([p.position_ids for p in parts], dim=1)
    assert pos[0].tolist() == [*range(9), *range(6), 0]  # the pad is a sequence of its own
    assert all(p.seq_lens == (9, 6, 1) and p.cu_seq_lens.tolist() == [0, 9, 15, 16] for p in parts)
    assert [p.tokens for p in parts] == [8, 7]


def test_each_target_is_scored_on_exactly_the_rank_holding_its_logit():
    mb = packed([9, 6, 5])
    parts = slices(mb, 4)  # 20 tokens, 5 a rank
    back = torch.cat([p.logit_index + 5 * r for r, p in enumerate(parts)])
    assert back.tolist() == mb.logit_index.tolist()
    assert torch.equal(torch.cat([p.targets for p in parts]), mb.targets)
    assert all(((p.logit_index >= 0) & (p.logit_index < 5)).all() for p in parts)


def test_a_slice_without_targets_gets_one_zero_weight_dummy():
    mb = packed([4, 6])  # logits predicting targets at 2 and 6..8; ranks 0 and 2 of 5 hold none
    parts = slices(mb, 5)
    assert [p.seq_index.tolist() for p in parts] == [[-1], [0], [-1], [1, 1], [1]]
    assert [p.weight.tolist() for p in parts if p.seq_index[0] < 0] == [[0.0], [0.0]]
    assert sum(int(p.weight.sum()) for p in parts) == int(mb.weight.sum()) == 4


def test_a_multi_turn_loss_mask_splits_with_its_targets():
    masks = [torch.tensor([1, 1, 0, 0, 1, 1], dtype=torch.bool), torch.tensor([1, 0, 1])]
    mb = packed([9, 6], loss_masks=masks)
    parts = slices(mb, 4)  # 15 tokens -> 16, 4 a rank
    assert torch.equal(torch.cat([p.loss_mask for p in parts if p.seq_index[0] >= 0]), mb.loss_mask)
    for p in parts:  # each slice's mask is its own targets'
        if p.seq_index[0] >= 0:
            assert p.loss_mask.shape == p.targets.shape
    assert packed([9, 6]).loss_mask is None


def test_one_rank_of_sp_is_the_micro_batch_itself():
    mb = packed([9, 6])
    assert shard(mb, SequenceParallel(1, 0, 0, 1)) is mb


def test_heads_sp_cannot_split_padding_and_sequence_level_corrections_are_refused():
    config = SimpleNamespace(num_attention_heads=6, num_key_value_heads=2)
    assert model_errors(config, 2) == []
    assert model_errors(config, 1, packing=False, off_policy="seq-tis") == []
    (heads,) = model_errors(config, 4)
    assert "6 attention heads" in heads
    errors = model_errors(config, 2, packing=False, off_policy="geo-reject")
    assert any("learner.packing = true" in e for e in errors)
    assert any("geo-reject" in e for e in errors)


def run(model: Path, out: Path, world: int, sp: int, runs: list[str]) -> dict[str, list[dict]]:
    """{mode: every rank's {"metrics", "layer0_tokens"}} after one step per mode (sp_worker.py:
    "plain", "nan"), all in one spawn of `world` ranks."""
    extra = {"learner": {"world_size": world, "sequence_parallel": sp}, "runs": runs}
    spawn_ranks(world, [str(WORKER), str(model), str(out), json.dumps(extra)])
    return {
        mode: [json.loads((out / mode / f"metrics{r}.json").read_text()) for r in range(world)]
        for mode in runs
    }


@pytest.fixture(scope="module")
def one_rank(small_model, tmp_path_factory):
    """One rank's step in each mode: {mode: (its record, its updated weights)}."""
    out = tmp_path_factory.mktemp("one-rank")
    got = run(small_model, out, 1, 1, ["plain", "nan", "masked"])
    return {m: (got[m][0], load_file(out / m / "weights.safetensors")) for m in got}


@pytest.fixture(scope="module")
def sp2(small_model, tmp_path_factory):
    """Two SP ranks' step in each mode: {mode: (every rank's record, the weights' file)}."""
    out = tmp_path_factory.mktemp("sp2")
    got = run(small_model, out, 2, 2, ["plain", "nan", "masked"])
    return {m: (got[m], out / m / "weights.safetensors") for m in got}


def assert_same_step(got: list[dict], weights: Path, reference) -> None:
    """Every rank's loss, grad norm and token count, and the weights, equal the reference's."""
    ref, want = reference
    for g in got:
        assert g["metrics"]["loss"] == pytest.approx(ref["metrics"]["loss"], abs=1e-5)
        assert g["metrics"]["grad_norm"] == pytest.approx(ref["metrics"]["grad_norm"], abs=1e-5)
        assert g["metrics"]["tokens"] == ref["metrics"]["tokens"] == 512
    have = load_file(weights)
    assert have.keys() == want.keys()
    for k in want:
        torch.testing.assert_close(have[k], want[k], atol=1e-5, rtol=0, msg=k)


@pytest.mark.slow  # 1 rank, then 2, two steps each (~60 s on 2 shared cores)
def test_two_sp_ranks_train_a_512_token_batch_as_one_rank_with_half_the_tokens_each(one_rank, sp2):
    got, weights = sp2["plain"]
    assert one_rank["plain"][0]["layer0_tokens"] == [512]
    assert [g["layer0_tokens"] for g in got] == [[256], [256]]
    assert_same_step(got, weights, one_rank["plain"])


@pytest.mark.slow
def test_a_micro_batch_scored_without_its_sequence_count_gives_the_one_rank_loss(one_rank, sp2):
    """`_loss_and_stats(mb, None)` reads the sequence count from the micro-batch; under SP a
    slice may not hold the last sequence, so the ranks take the group's count
    (sequence_parallel.sequence_count) and their losses add up to the one rank's."""
    got, _ = sp2["plain"]
    split = sum(g["loss_uncounted"] for g in got)
    assert split == pytest.approx(one_rank["plain"][0]["loss_uncounted"], abs=1e-5)


@pytest.mark.slow
def test_a_sequence_split_over_sp_ranks_is_dropped_whole_by_the_nonfinite_guard(one_rank, sp2):
    """One NaN behaviour log-prob in rank 0's half of a sequence that crosses into rank 1's:
    both ranks drop the whole sequence, as one rank does (learner/sequence_parallel.py:
    agree_on_dropped), and the step equals one rank's, the sequence counted once."""
    got, weights = sp2["nan"]
    assert one_rank["nan"][0]["metrics"]["nonfinite_learner_dropped"] == 1
    assert [g["metrics"]["nonfinite_learner_dropped"] for g in got] == [1, 1]
    assert_same_step(got, weights, one_rank["nan"])


@pytest.mark.slow
def test_a_multi_turn_loss_mask_splits_with_the_tokens_over_sp_ranks(one_rank, sp2):
    """Every sequence a two-turn trajectory whose feedback tokens (garbage behaviour log-probs)
    the mask takes out of the loss; the masks split with their targets over the two ranks, and
    the step equals one rank's (and differs from the unmasked batch's)."""
    got, weights = sp2["masked"]
    assert_same_step(got, weights, one_rank["masked"])
    plain = one_rank["plain"][0]["metrics"]["loss"]
    assert one_rank["masked"][0]["metrics"]["loss"] != pytest.approx(plain, abs=1e-5)


@pytest.mark.slow  # 4 gloo ranks (~75 s on 2 shared cores)
def test_two_dp_groups_of_two_sp_ranks_train_as_one_rank(small_model, tmp_path, one_rank):
    """World 4 = 2 data-parallel groups × SP 2: the batch is balanced over the two groups
    (learner/packing.py), and each group's micro-batch is split over its two ranks."""
    got = run(small_model, tmp_path, 4, 2, ["plain"])["plain"]
    tokens = [g["layer0_tokens"] for g in got]
    assert tokens[0] == tokens[1] and tokens[2] == tokens[3]  # the SP pairs share a row
    assert 512 <= sum(t[0] for t in tokens) <= 514  # every token once (a row padded to even)
    assert max(t[0] for t in tokens) < 256  # each rank a half of its group's share
    assert_same_step(got, tmp_path / "plain" / "weights.safetensors", one_rank["plain"])

"""Planning micro-batches and collating them: budgets, coverage, target alignment."""

from __future__ import annotations

import torch

from microcoder.learner.batch import BatchStats, TrainBatch
from microcoder.learner.packing import (
    balance_ranks,
    collate,
    pack_bins,
    padded_rows,
    plan_micro_batches,
)

LENGTHS = [50, 7, 33, 12, 90, 5, 41, 8, 19, 64]


def make_batch(lengths, prompt=3) -> TrainBatch:
    ids = [torch.arange(100 * k, 100 * k + n) for k, n in enumerate(lengths)]
    resp = torch.tensor([n - prompt for n in lengths])
    return TrainBatch(
        input_ids=ids,
        prompt_lens=torch.full((len(lengths),), prompt),
        response_lens=resp,
        advantages=torch.arange(len(lengths), dtype=torch.float32),
        temperatures=torch.ones(len(lengths)),
        behaviour_logprobs=[torch.zeros(int(r)) for r in resp],
        policy_versions=torch.zeros(len(lengths), dtype=torch.long),
        stats=BatchStats(
            groups=1,
            responses=len(lengths),
            truncated=0,
            looping=0,
            masked=0,
            overlong_penalised=0,
            mixed_versions=0,
        ),
    )


def test_bins_respect_the_budget_and_cover_every_sequence_once():
    bins = pack_bins(range(len(LENGTHS)), LENGTHS, 100)
    assert sorted(i for b in bins for i in b) == list(range(len(LENGTHS)))
    assert all(sum(LENGTHS[i] for i in b) <= 100 for b in bins)


def test_a_sequence_longer_than_the_budget_gets_its_own_bin():
    assert [0] in pack_bins([0, 1], [200, 10], 100)


def test_padded_rows_keep_rows_times_longest_within_budget():
    rows = padded_rows(range(len(LENGTHS)), LENGTHS, 128)
    assert all(len(r) * max(LENGTHS[i] for i in r) <= 128 for r in rows if len(r) > 1)
    assert [i for r in rows for i in r] == list(range(len(LENGTHS)))


def test_ranks_get_balanced_token_counts():
    loads = [sum(LENGTHS[i] for i in s) for s in balance_ranks(LENGTHS, 3)]
    assert max(loads) - min(loads) <= max(LENGTHS)


def test_every_rank_runs_the_same_number_of_micro_batches():
    plan = plan_micro_batches([90, 80, 5], world=2, budget=100)
    assert len({len(p) for p in plan}) == 1
    assert sorted(i for p in plan for mb in p for i in mb) == [0, 1, 2]


def test_packed_logit_positions_predict_the_response_tokens():
    batch = make_batch([6, 9, 4])
    mb = collate(batch, [0, 1, 2], torch.ones(3, dtype=torch.float64), packed=True)
    flat = mb.input_ids.flatten()
    assert torch.equal(flat[mb.logit_index + 1], mb.targets)
    assert mb.targets.numel() == int(batch.response_lens.sum())
    assert mb.cu_seq_lens.tolist() == [0, 6, 15, 19]
    assert mb.position_ids[0, 6] == 0 and mb.position_ids[0, 14] == 8


def test_padded_logit_positions_predict_the_response_tokens():
    batch = make_batch([6, 9, 4])
    mb = collate(batch, [0, 1, 2], torch.ones(3, dtype=torch.float64), packed=False)
    flat = mb.input_ids.flatten()
    assert mb.input_ids.shape == (3, 9)
    assert torch.equal(flat[mb.logit_index + 1], mb.targets)


def test_per_token_fields_follow_their_sequence():
    batch = make_batch([6, 9])
    mb = collate(batch, [1, 0], torch.tensor([0.5, 0.25], dtype=torch.float64), packed=True)
    assert mb.advantages.tolist() == [1.0] * 6 + [0.0] * 3
    assert mb.weight.tolist() == [0.25] * 6 + [0.5] * 3


def test_empty_micro_batch_is_a_zero_weight_dummy():
    mb = collate(make_batch([6]), [], torch.ones(1, dtype=torch.float64), packed=True)
    assert mb.tokens == 0 and float(mb.weight.sum()) == 0.0
